"""Reading tensors without a GPU: __cuda_array_interface__ parsing, host arrays refused as device memory."""

from __future__ import annotations

import ctypes

import gpuxfer
import numpy as np
import pytest
from gpuxfer._arrays import device_memory


class FakeCudaArray:
    def __init__(self, **fields):
        self.__cuda_array_interface__ = {"data": (0xDEAD_0000, False), "version": 3, **fields}


def test_a_contiguous_interface_gives_pointer_and_bytes():
    memory = device_memory(FakeCudaArray(shape=(4, 8), typestr="<f4", strides=None))
    assert (memory.ptr, memory.nbytes, memory.stream) == (0xDEAD_0000, 128, None)


def test_explicit_c_strides_are_contiguous_too():
    assert device_memory(FakeCudaArray(shape=(4, 8), typestr="<u2", strides=(16, 2))).nbytes == 64


def test_the_producer_stream_is_read():
    assert device_memory(FakeCudaArray(shape=(3,), typestr="|u1", stream=2)).stream == 2


def test_a_strided_view_is_refused_rather_than_copied():
    with pytest.raises(gpuxfer.InvalidArgumentError, match="C-contiguous"):
        device_memory(FakeCudaArray(shape=(4, 8), typestr="<f4", strides=(64, 4)))


def test_a_broken_interface_is_an_invalid_argument():
    with pytest.raises(gpuxfer.InvalidArgumentError, match="__cuda_array_interface__"):
        device_memory(FakeCudaArray(shape=(4,), typestr="float"))


@pytest.mark.parametrize("host", [np.zeros(16, np.uint8), b"bytes", bytearray(4), 3])
def test_host_memory_is_no_device_tensor(host):
    with pytest.raises(gpuxfer.InvalidArgumentError, match="expected a CUDA tensor"):
        device_memory(host)


def test_host_views_see_the_callers_bytes_without_a_copy():
    a = np.arange(64, dtype=np.uint32)
    assert gpuxfer._gpuxfer._host_view(a, True) == (a.ctypes.data, 256)
    data = b"0123456789"
    ptr, nbytes = gpuxfer._gpuxfer._host_view(data, False)
    assert nbytes == 10


def test_host_views_refuse_strided_and_read_only_memory():
    with pytest.raises(TypeError, match="C-contiguous"):
        gpuxfer._gpuxfer._host_view(np.zeros((4, 4), np.uint8)[:, 1], False)
    with pytest.raises(TypeError, match="writable"):
        gpuxfer._gpuxfer._host_view(b"read only", True)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):  # DLPack's unversioned struct, named "dltensor" in its capsule
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):  # DLPack 1.x, "dltensor_versioned", with flags
    _fields_ = [
        ("major", ctypes.c_uint32),
        ("minor", ctypes.c_uint32),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),  # bit 0: read-only
        ("dl_tensor", _DLTensor),
    ]


class FakeCudaDlpack:
    """A DLPack producer that says its bytes (host bytes in truth, never touched) are on CUDA device 0.
    No deleters: this object owns the structs and the bytes. A read-only one exports versioned capsules
    alone (an unversioned one cannot say read-only), as the protocol asks."""

    def __init__(self, nbytes=16, read_only=False):
        self.memory = np.zeros(nbytes, np.uint8)
        self.read_only = read_only
        self.shape = (ctypes.c_int64 * 1)(nbytes)
        data = self.memory.ctypes.data
        tensor = _DLTensor(data, _DLDevice(2, 0), 1, _DLDataType(1, 8, 1), self.shape, None, 0)
        self.unversioned = _DLManagedTensor(tensor, None, None)
        self.versioned = _DLManagedTensorVersioned(1, 0, None, None, 1 if read_only else 0, tensor)

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, max_version=None, **_):
        if max_version is None and self.read_only:
            raise BufferError("read-only: ask for a versioned capsule")
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        if max_version is None:
            return new(ctypes.addressof(self.unversioned), b"dltensor", None)
        return new(ctypes.addressof(self.versioned), b"dltensor_versioned", None)


def _read_only(array):
    array.setflags(write=False)
    return array


@pytest.mark.parametrize(
    "array, writable, match",
    [
        (np.zeros((4, 4), np.uint8)[:, ::2], False, "C-contiguous"),
        (np.zeros((4, 4), np.uint8)[:, ::2], True, "C-contiguous"),
        (b"read only", True, "writable"),
        (_read_only(np.zeros(4, np.uint8)), True, "writable"),
        (FakeCudaDlpack(), False, "in host memory, got an array on DLPack device 2"),
        (FakeCudaDlpack(), True, "in host memory, got an array on DLPack device 2"),
        (object(), False, "buffer protocol or __dlpack__"),
    ],
)
def test_host_array_errors_are_invalid_arguments_that_stay_type_errors(array, writable, match):
    # As the device-tensor ones are (InvalidArgumentError, code invalid_argument), and a TypeError still,
    # as they always were.
    with pytest.raises(gpuxfer.InvalidHostArrayError, match=match) as caught:
        gpuxfer._gpuxfer._host_view(array, writable)
    error = caught.value
    assert isinstance(error, gpuxfer.InvalidArgumentError) and isinstance(error, TypeError)
    assert error.code == "invalid_argument" and match in error.message
    assert str(error) == f"gpuxfer invalid_argument: {error.message}"


def test_a_fake_cuda_dlpack_producer_reads_as_a_device_tensor():
    # The producer above is what it says, so the errors it gives as a host array are about its device.
    fake = FakeCudaDlpack(16)
    assert device_memory(fake)[:3] == (fake.memory.ctypes.data, 16, 0)


# --- __cuda_array_interface__'s read-only flag and stream, honoured by every operation --------------------


def test_the_read_only_flag_is_read():
    assert device_memory(FakeCudaArray(shape=(4,), typestr="|u1")).readonly is False
    assert device_memory(FakeCudaArray(shape=(4,), typestr="|u1", data=(0xDEAD_0000, True))).readonly is True


class FakeDlpackAndCudaArray(FakeCudaArray):
    """Read through DLPack (_device_view patched: CUDA device 3), with an interface beside it."""

    def __dlpack__(self, stream=None):
        raise AssertionError("_device_view is patched")


def test_an_object_read_through_dlpack_keeps_its_interfaces_stream_and_flag(monkeypatch):
    monkeypatch.setattr(gpuxfer._gpuxfer, "_device_view", lambda tensor: (0xBEEF_0000, 64, 2, 3, False))
    memory = device_memory(
        FakeDlpackAndCudaArray(shape=(64,), typestr="|u1", stream=0x7F00, data=(0xBEEF_0000, True))
    )
    assert memory == (0xBEEF_0000, 64, 3, 0x7F00, True)
    with pytest.raises(gpuxfer.InvalidArgumentError, match="read-only"):
        device_memory(FakeDlpackAndCudaArray(shape=(64,), typestr="|u1", data=(0, True)), writes="x: out")


@pytest.mark.parametrize("stream", [-1, 1 << 64, "0x7f00", True])
def test_a_stream_that_is_no_handle_is_refused(stream):
    with pytest.raises(gpuxfer.InvalidArgumentError, match="stream"):
        device_memory(FakeCudaArray(shape=(4,), typestr="|u1", stream=stream))


def read_only(**fields):
    return FakeCudaArray(shape=(64,), typestr="|u1", **{"data": (0xDEAD_0000, True), **fields})


def writable(**fields):
    return FakeCudaArray(shape=(64,), typestr="|u1", **fields)


@pytest.fixture
def calls(monkeypatch):
    """The host waits, GPU waits and C++ calls a Transfer or Communicator method makes, recorded instead
    of made (nothing reaches CUDA: these run with or without a GPU)."""
    made = []
    monkeypatch.setattr(gpuxfer._gpuxfer, "_wait_for_stream", lambda *args: made.append(("host wait", *args)))
    monkeypatch.setattr(gpuxfer._gpuxfer, "_stream_wait", lambda *args: made.append(("gpu wait", *args)))
    # Each recorded with its stream argument: (device, ptr, nbytes, stream, tensor, owner), (dst, ptr,
    # nbytes, stream, used), (slices, out, stream, used).
    for name, at in (("_set_device_buffer", 3), ("_gather_to_device", 3), ("_gather_slices", 2)):
        monkeypatch.setattr(
            gpuxfer.Transfer, name, lambda self, *args, name=name, at=at: made.append((name, args[at])) or []
        )
    return made


@pytest.fixture
def transfer():
    return gpuxfer.Transfer(gpuxfer.Manager(min_devices=0))


def test_a_read_only_array_is_refused_where_transfer_would_write_it(transfer, calls):
    writes = [lambda: transfer.gather_to_device(0, read_only()), lambda: transfer.set_device_buffer(0, read_only())]
    for call in writes:
        with pytest.raises(gpuxfer.InvalidArgumentError, match="read-only"):
            call()
    assert calls == []
    transfer.gather_slices([(0, read_only())], np.zeros(64, np.uint8))  # a source: read only
    assert calls == [("_gather_slices", None)]


@pytest.mark.parametrize("read_only", [False, True])
def test_a_dlpack_device_tensor_says_whether_it_is_read_only(read_only):
    fake = FakeCudaDlpack(64, read_only=read_only)
    assert device_memory(fake) == (fake.memory.ctypes.data, 64, 0, None, read_only)


def test_a_read_only_dlpack_tensor_is_read_as_a_source_and_refused_where_written(transfer, calls):
    # As a read-only __cuda_array_interface__ is: read where the call only reads it (gather_slices'
    # slices), refused where it would write it, by its own name, not as "no CUDA tensor".
    source = FakeCudaDlpack(64, read_only=True)
    with pytest.raises(gpuxfer.InvalidArgumentError, match="x: out: .* is read-only .*DLPack"):
        device_memory(source, writes="x: out")
    for call in (lambda: transfer.gather_to_device(0, source), lambda: transfer.set_device_buffer(0, source)):
        with pytest.raises(gpuxfer.InvalidArgumentError, match="read-only"):
            call()
    assert calls == []
    transfer.gather_slices([(0, source)], np.zeros(64, np.uint8))
    assert calls == [("_gather_slices", None)]


def test_transfer_honours_the_interfaces_stream(transfer, calls):
    """Blocking forms wait on the host for the stream the interface names (not for the legacy default
    one); stream-ordered forms make their stream wait for it on the GPU; each stream once."""
    out = np.zeros(256, np.uint8)
    transfer.gather_to_device(0, writable(stream=0x7F00))
    transfer.gather_to_device(0, writable(stream=0x7F00), stream=0x7F01)
    slices = [(0, writable(stream=0x7F00)), (0, writable(stream=1)), (0, writable(stream=0x7F00))]
    transfer.gather_slices(slices, out)
    transfer.gather_slices([(0, writable(stream=0x7F00)), (0, writable(stream=1))], out, stream=0x7F01)
    transfer.gather_slices([(0, writable(stream=0x7F01))], out, stream=0x7F01)  # the same stream: no wait
    transfer.set_device_buffer(0, writable(stream=0x7F00))  # registered with that stream: no wait
    transfer.set_device_buffer(0, writable(stream=0x7F00), stream=0x7F01)
    assert calls == [
        ("host wait", 0x7F00, -1, "gather_to_device"),
        ("_gather_to_device", None),
        ("gpu wait", 0x7F01, 0x7F00, -1, "gather_to_device"),
        ("_gather_to_device", 0x7F01),
        ("host wait", 0x7F00, -1, "gather_slices"),
        ("_gather_slices", None),
        ("gpu wait", 0x7F01, 0x7F00, -1, "gather_slices"),
        ("gpu wait", 0x7F01, 1, -1, "gather_slices"),
        ("_gather_slices", 0x7F01),
        ("_gather_slices", 0x7F01),
        ("_set_device_buffer", 0x7F00),
        ("gpu wait", 0x7F01, 0x7F00, -1, "set_device_buffer"),
        ("_set_device_buffer", 0x7F01),
    ]


class FakeRank:
    """A Communicator of rank 0 of 2 without NCCL: its Python methods, its C++ calls recorded."""

    rank, world_size = 0, 2
    _ordered = gpuxfer.Communicator._ordered

    def __init__(self, calls):
        self.calls = calls

    def synchronize(self, stream):
        self.calls.append(("synchronize", stream))

    def __getattr__(self, name):  # _broadcast, _all_gather, ...: recorded
        if not name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, stream, used: self.calls.append((name, stream)) or []


# operation: (arguments of rank 0, given a read-only array and a writable one; what it writes)
WRITES = {
    "broadcast": (lambda ro, rw: (ro, 1), "broadcast: buf"),  # root 1: rank 0 receives
    "all_gather": (lambda ro, rw: (rw, ro), "all_gather: recv"),
    "gather": (lambda ro, rw: (rw, ro, 0), "gather: recv"),
    "copy": (lambda ro, rw: (1, 0, None, ro), "copy: recv"),
    "broadcast_from_host": (lambda ro, rw: (None, ro, 1), "broadcast_from_host: recv"),
}


@pytest.mark.parametrize("operation", WRITES)
def test_a_read_only_array_is_refused_where_a_communicator_would_write_it(calls, operation):
    arguments, written = WRITES[operation]
    with pytest.raises(gpuxfer.InvalidArgumentError, match=f"{written}: .*read-only"):
        getattr(gpuxfer.Communicator, operation)(FakeRank(calls), *arguments(read_only(), writable()))
    assert calls == []


def test_a_communicator_reads_read_only_sources(calls):
    rank = FakeRank(calls)
    gpuxfer.Communicator.broadcast(rank, read_only(), 0)  # the root's buf is read
    gpuxfer.Communicator.all_gather(rank, read_only(), writable())
    gpuxfer.Communicator.gather(rank, read_only(), None, 1)  # recv unused off the root
    gpuxfer.Communicator.copy(rank, 0, 1, read_only(), None)
    gpuxfer.Communicator.gather_to_host(rank, read_only(), 1)
    assert [c[0] for c in calls] == ["_broadcast", "_all_gather", "_gather", "_copy", "_gather_to_host"]


def test_a_communicator_honours_the_interfaces_stream_of_every_array_it_touches(calls):
    rank = FakeRank(calls)
    where = "rank 0 of 2: an operation"
    gpuxfer.Communicator.all_gather(rank, writable(stream=0x7F00), writable(stream=0x7F01))
    gpuxfer.Communicator.all_gather(rank, writable(stream=0x7F00), writable(stream=0x7F05), stream=0x7F05)
    gpuxfer.Communicator.copy(rank, 1, 0, writable(stream=0x7F02), writable(stream=0x7F03))  # recv alone
    gpuxfer.Communicator.gather(rank, writable(stream=1), writable(stream=0x7F04), 1)  # legacy; recv unused
    assert calls == [
        ("synchronize", 0x7F00),
        ("synchronize", 0x7F01),
        ("_all_gather", None),
        ("gpu wait", 0x7F05, 0x7F00, -1, where),
        ("_all_gather", 0x7F05),
        ("synchronize", 0x7F03),
        ("_copy", None),
        ("_gather", None),
    ]
