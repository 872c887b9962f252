"""The package without a GPU: import, version, stubs, the exception classes and their codes."""

from __future__ import annotations

import pathlib
import re

import gpuxfer
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CODES = [
    "invalid_argument",
    "invalid_buffer",
    "invalid_option",
    "no_device",
    "out_of_memory",
    "unsupported",
    "cuda_error",
    "nccl_error",
    "device_fault",
    "comm_error",
]


def test_version_is_the_cpp_librarys():
    header = (ROOT / "include/gpuxfer/version.hpp").read_text()
    assert gpuxfer.__version__ == re.search(r'version_string = "([^"]+)"', header).group(1)


def test_every_name_in_all_exists():
    for name in gpuxfer.__all__:
        assert hasattr(gpuxfer, name), name


def test_stubs_and_py_typed_ship_beside_the_module():
    package = pathlib.Path(gpuxfer.__file__).parent
    assert (package / "py.typed").exists()
    stub = (package / "__init__.pyi").read_text()
    for name in gpuxfer.__all__:
        assert re.search(rf"\b{re.escape(name)}\b", stub), f"{name} missing from __init__.pyi"


def test_every_public_name_of_the_stub_exists_in_the_module():
    # A name a type checker accepts but the module lacks would pass the checker and fail at run time.
    import ast

    stub = ast.parse((pathlib.Path(gpuxfer.__file__).parent / "__init__.pyi").read_text())
    names = set()
    for node in stub.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    missing = sorted(n for n in names if not n.startswith("_") and not hasattr(gpuxfer, n))
    assert not missing, f"in __init__.pyi but not in the module: {missing}"


@pytest.mark.parametrize("code", CODES)
def test_a_cpp_error_becomes_its_subclass_with_code_and_message(code):
    with pytest.raises(gpuxfer.Error) as caught:
        gpuxfer._gpuxfer._raise(code, "device 3: 12 bytes")
    error = caught.value
    assert error.code == code
    assert type(error).code == code
    assert error.message == "device 3: 12 bytes"
    assert str(error) == f"gpuxfer {code}: device 3: 12 bytes"
    assert type(error) is not gpuxfer.Error


@pytest.mark.parametrize("code", CODES)
def test_an_error_raised_in_python_reads_as_a_cpp_one(code):
    cls = type(_raised(code))
    error = cls("device 3: 12 bytes")
    assert (error.code, error.message) == (code, "device 3: 12 bytes")
    assert str(error) == f"gpuxfer {code}: device 3: 12 bytes"


@pytest.mark.parametrize("code", CODES)
def test_errors_survive_pickle_and_copy(code):
    import copy
    import pickle

    for error in (_raised(code), type(_raised(code))("device 3: 12 bytes")):
        for again in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
            assert type(again) is type(error)
            assert (str(again), again.code, again.message) == (str(error), error.code, error.message)


def _raised(code):
    try:
        gpuxfer._gpuxfer._raise(code, "")
    except gpuxfer.Error as error:
        return error
    raise AssertionError(f"_raise({code!r}) raised nothing")


def test_argument_errors_are_also_value_errors():
    for cls in (gpuxfer.InvalidArgumentError, gpuxfer.InvalidBufferError, gpuxfer.InvalidOptionError):
        assert issubclass(cls, ValueError) and issubclass(cls, gpuxfer.Error)
    assert issubclass(gpuxfer.OutOfMemoryError, MemoryError)


def test_an_unknown_code_is_refused():
    with pytest.raises(ValueError, match="no Errc named"):
        gpuxfer._gpuxfer._raise("bogus", "x")
