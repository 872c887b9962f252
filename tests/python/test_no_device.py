"""What a machine without a GPU gives: no_device errors, a manager of no devices, argument checks.

Skipped where a GPU is present (the GPU tests cover those paths there).
"""

from __future__ import annotations

import weakref

import gpuxfer
import numpy as np
import pytest
from conftest import DEVICE_COUNT

pytestmark = pytest.mark.skipif(
    DEVICE_COUNT > 0, reason="a CUDA device is present: these are the no-GPU paths"
)


class FakeCudaArray:
    __cuda_array_interface__ = {"data": (0xDEAD_0000, False), "shape": (16,), "typestr": "|u1", "version": 3}


def test_a_default_manager_raises_no_device_with_the_cuda_reason():
    with pytest.raises(gpuxfer.NoDeviceError) as caught:
        gpuxfer.Manager()
    assert caught.value.code == "no_device"
    assert caught.value.message
    assert str(caught.value).startswith("gpuxfer no_device: ")


def test_min_devices_zero_gives_a_manager_of_none():
    m = gpuxfer.Manager(min_devices=0)
    assert m.device_count == 0 and m.devices == []
    assert m.device_status  # the CUDA reason
    assert not m.nccl_available or m.nccl_version > 0
    stats = m.pinned_pool_stats()
    assert stats["in_use"] == 0 and stats["limit"] == m.options.pool_limit_bytes
    with pytest.raises(gpuxfer.InvalidBufferError):
        m.device(0)


@pytest.fixture
def transfer():
    return gpuxfer.Transfer(gpuxfer.Manager(min_devices=0))


def test_device_indices_are_checked(transfer):
    for call in (
        lambda: transfer.set_device_buffer(0, FakeCudaArray()),
        lambda: transfer.clear_device_buffer(0),
        lambda: transfer.device_buffer(0),
        lambda: transfer.gather(0),
        lambda: transfer.gather_blocking(0),
        lambda: transfer.copy_buffer(0, 0, b"abc"),
        lambda: transfer.copy_device_buffer(0, 1),
        lambda: transfer.broadcast_from_device(0),
    ):
        with pytest.raises(gpuxfer.InvalidBufferError) as caught:
            call()
        assert caught.value.code == "invalid_buffer"


def test_set_device_buffer_checks_the_tensor_and_stream_before_the_device(transfer):
    with pytest.raises(gpuxfer.InvalidArgumentError, match="CUDA tensor"):
        transfer.set_device_buffer(0, np.zeros(4, np.uint8))
    with pytest.raises(gpuxfer.InvalidArgumentError, match="stream"):
        transfer.set_device_buffer(0, FakeCudaArray(), stream="default")


def test_host_arguments_are_checked(transfer):
    with pytest.raises(TypeError):
        transfer.broadcast(object())
    with pytest.raises(TypeError, match="writable"):
        transfer.gather_into(b"read only")


def test_host_argument_errors_are_invalid_arguments_with_a_code(transfer):
    strided = np.zeros((4, 4), np.uint8)[:, ::2]
    for call, match in (
        (lambda: transfer.gather_into(strided), "C-contiguous"),
        (lambda: transfer.gather_into(b"read only"), "writable"),
        (lambda: transfer.broadcast(strided), "C-contiguous"),
        (lambda: transfer.copy_buffer(0, 0, object()), "buffer protocol or __dlpack__"),
        (lambda: gpuxfer.register_host(strided), "C-contiguous"),  # before the driver is asked
    ):
        with pytest.raises(gpuxfer.InvalidArgumentError, match=match) as caught:
            call()
        assert caught.value.code == "invalid_argument"
        assert isinstance(caught.value, TypeError)  # as before


def test_register_host_needs_the_driver():
    with pytest.raises(gpuxfer.NoDeviceError):
        gpuxfer.register_host(np.zeros(4096, np.uint8))


def test_gather_slices_needs_a_device_it_can_tell(transfer):
    with pytest.raises(gpuxfer.InvalidArgumentError, match=r"pass \(device, tensor\)"):
        transfer.gather_slices([FakeCudaArray()], np.zeros(16, np.uint8))


def test_a_finalizer_run_by_a_reap_may_call_back_into_the_transfer(transfer):
    # With no device a stream-ordered broadcast on the legacy stream queues nothing: its mark has no
    # events, so the next reap drops what it kept. Dropping the array below runs its finalizer inside
    # that reap; the finalizer reaps again and keeps another array. Both must see a whole list: the
    # second array is kept, then dropped by the next reap (a reap re-entered mid-erase lost its entry,
    # leaking it, after destroying the first entry twice).
    second = [np.zeros(16, np.uint8)]
    second_alive = weakref.ref(second[0])
    inner = []

    class CallsBack(np.ndarray):
        def __del__(self):
            inner.append(transfer._kept)  # reaps
            transfer.broadcast(second.pop(), stream=0)  # keeps

    transfer.broadcast(np.zeros(16, np.uint8).view(CallsBack), stream=0)
    assert transfer._kept == 1, "the finalizer's call was not kept"
    assert inner == [0]
    assert transfer._kept == 0 and second_alive() is None, "what the finalizer's call kept was not let go"
