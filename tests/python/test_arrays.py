"""Reading tensors without a GPU: __cuda_array_interface__ parsing, host arrays refused as device memory."""

from __future__ import annotations

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
