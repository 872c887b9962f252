"""What a person reads when a call goes wrong, and what help() shows: argument errors that name the
argument, its value and the accepted range; exceptions named as gpuxfer exports them; a docstring with an
example on every public function. They hold with a GPU and without one."""

from __future__ import annotations

import inspect
import pickle

import gpuxfer
import pytest


@pytest.fixture
def transfer():
    return gpuxfer.Transfer(gpuxfer.Manager(min_devices=0))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"host_threads": -3}, "Manager(host_threads=-3): host_threads takes an int from 1 to 256"),
        ({"simulated_devices": -1}, "Manager(simulated_devices=-1): simulated_devices takes an int from 0 to 64"),
        ({"chunk_bytes": "8XB"}, "Manager(chunk_bytes='8XB'): "),
        ({"devices": "0,x"}, "Manager(devices='0,x'): "),
        ({"host_threads": 300}, "host_threads must be in 1..256, got 300"),
    ],
)
def test_a_bad_manager_argument_is_named_with_its_value_and_range(options, expected):
    with pytest.raises(gpuxfer.InvalidOptionError) as caught:
        gpuxfer.Manager(min_devices=0, **options)
    assert expected in str(caught.value)
    assert "incompatible function arguments" not in str(caught.value)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda t: t.gather_blocking(-1), "gather_blocking: dst_device=-1 is not a device index"),
        (lambda t: t.gather(-1), "gather: dst_device=-1 is not a device index"),
        (lambda t: t.copy_device_buffer(-2, 0), "copy_device_buffer: src_device=-2 is not a device index"),
        (lambda t: t.broadcast_from_device(-5), "broadcast_from_device: root=-5 is not a device index"),
        (lambda t: t.clear_device_buffer(-1), "clear_device_buffer: device=-1 is not a device index"),
        (lambda t: t.gather_into(bytearray(8), skip_device=-1), "gather_into: skip_device=-1"),
        (lambda t: t.manager.device(-1), "Manager.device: index=-1 is not a device index"),
    ],
)
def test_a_bad_device_index_is_named_with_its_value_and_range(transfer, call, expected):
    with pytest.raises(gpuxfer.InvalidBufferError) as caught:
        call(transfer)
    assert expected in str(caught.value)
    count = len(transfer.manager.devices)  # none without a GPU
    has = "no devices" if count == 0 else f"{count} device"
    assert f"the manager has {has}" in str(caught.value)
    assert "incompatible function arguments" not in str(caught.value)


def test_exceptions_print_as_gpuxfer_exports_them():
    with pytest.raises(gpuxfer.InvalidOptionError) as caught:
        gpuxfer.Manager(host_threads=-3)  # refused before any device is looked at, GPU or not
    assert type(caught.value).__module__ == "gpuxfer"
    assert repr(type(caught.value)) == "<class 'gpuxfer.InvalidOptionError'>"
    for name in gpuxfer.__all__:
        value = getattr(gpuxfer, name)
        if isinstance(value, type) and issubclass(value, gpuxfer.Error):
            assert value.__module__ == "gpuxfer", name
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is gpuxfer.InvalidOptionError and str(again) == str(caught.value)


def _public_functions():
    for name in gpuxfer.__all__:
        value = getattr(gpuxfer, name)
        if inspect.isroutine(value):
            yield name, value
    for cls in (gpuxfer.Manager, gpuxfer.Transfer, gpuxfer.Communicator, gpuxfer.GatherHandle,
                gpuxfer.TransferHandle):
        for name, member in vars(cls).items():
            if not name.startswith("_") and callable(member):
                yield f"{cls.__name__}.{name}", member
        for base in cls.__mro__[1:]:
            if base.__module__.startswith("gpuxfer"):
                for name, member in vars(base).items():
                    if not name.startswith("_") and callable(member) and name not in vars(cls):
                        yield f"{cls.__name__}.{name}", member


@pytest.mark.parametrize(("name", "function"), list(_public_functions()), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_function_has_a_docstring_with_an_example(name, function):
    doc = inspect.getdoc(function) or ""
    assert ">>> " in doc, f"{name} has no example in its docstring: {doc!r}"
