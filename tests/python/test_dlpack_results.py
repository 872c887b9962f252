"""Gathered results through DLPack: PinnedArrays report kDLCUDAHost and hand torch a pinned CPU tensor over
the very block, which stays leased until the tensor dies. The DLPack logic itself runs without a GPU (an
array over ordinary memory stands in for a block); what torch, cupy and numpy do with real blocks needs one.
"""

from __future__ import annotations

import gc

import gpuxfer
import gpuxfer._pinned as pinned
import numpy as np
import pytest
from frameworks import load, pattern

CUDA_HOST = (3, 0)


class Producer:
    """Hands a consumer whatever capsule the wrapped PinnedArray gives for dl_device (numpy consumes it)."""

    def __init__(self, array, dl_device):
        self.array, self.dl_device = array, dl_device

    def __dlpack_device__(self):
        return self.dl_device

    def __dlpack__(self, max_version=None, **_):
        return self.array.__dlpack__(dl_device=self.dl_device, max_version=max_version)


@pytest.fixture
def fake_block(monkeypatch):
    """A PinnedArray over a bytearray, which block_of is told to take for a PinnedBlock."""
    memory = bytearray(pattern(0, 4096).tobytes())

    def block_of(array):
        base = array.base
        while isinstance(base, np.ndarray):
            base = base.base
        return base if base is memory else None

    monkeypatch.setattr(pinned, "block_of", block_of)
    return pinned.PinnedArray((4096,), np.uint8, memory)


def test_a_pinned_block_offers_its_bytes_and_the_factory_makes_pinned_arrays():
    # PinnedBlock's buffer protocol and the factory every gathered array comes from, over an empty lease
    # (real ones need a GPU; numpy keeps no base for an empty array, so block_of is not asked here).
    block = gpuxfer._gpuxfer._empty_pinned_block()
    view = memoryview(block)
    assert (view.nbytes, view.readonly, block.nbytes, block.ptr) == (0, False, 0, 0)
    a = pinned._from_block(block)
    assert type(a) is gpuxfer.PinnedArray and a.dtype == np.uint8 and a.shape == (0,)


def test_an_array_over_a_block_reports_cuda_host_and_so_do_its_views(fake_block):
    assert fake_block.pinned
    assert fake_block.__dlpack_device__() == CUDA_HOST
    assert fake_block[100:200].__dlpack_device__() == CUDA_HOST
    assert fake_block.view(np.uint32)[::3].__dlpack_device__() == CUDA_HOST


def test_copies_and_results_are_plain_cpu_arrays(fake_block):
    for derived in (fake_block.copy(), fake_block + 1):
        assert not derived.pinned
        assert derived.__dlpack_device__() == (1, 0)
        with pytest.raises(BufferError, match="not pinned"):
            derived.__dlpack__(dl_device=CUDA_HOST)


def test_the_default_capsule_is_kdlcpu_over_the_same_bytes(fake_block):
    imported = np.from_dlpack(fake_block)
    assert imported.ctypes.data == fake_block.ctypes.data
    assert imported.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(imported, pattern(0, 4096))


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_a_cuda_host_capsule_on_request_keeps_pointer_dtype_and_strides(fake_block, max_version):
    view = fake_block.view(np.uint16)[5:400:3]
    imported = np.from_dlpack(Producer(view, CUDA_HOST))
    assert imported.__dlpack_device__() == CUDA_HOST  # numpy keeps the device of what it imported
    assert imported.ctypes.data == view.ctypes.data
    assert (imported.dtype, imported.shape, imported.strides) == (view.dtype, view.shape, view.strides)
    np.testing.assert_array_equal(imported, view)
    capsule = view.__dlpack__(dl_device=CUDA_HOST, max_version=max_version)
    assert ("dltensor_versioned" in repr(capsule)) == (max_version is not None)


def test_a_read_only_array_gives_a_read_only_capsule(fake_block):
    fake_block.setflags(write=False)
    assert not np.from_dlpack(Producer(fake_block, CUDA_HOST)).flags.writeable


def test_cuda_host_capsules_take_no_copy_and_no_stream(fake_block):
    with pytest.raises(BufferError, match="copy=True"):
        fake_block.__dlpack__(dl_device=CUDA_HOST, copy=True)
    with pytest.raises(BufferError, match="no stream"):
        fake_block.__dlpack__(dl_device=CUDA_HOST, stream=7)


# --- with a GPU: real blocks --------------------------------------------------------------------------


def gathered(manager, upload, nbytes):
    transfer = gpuxfer.Transfer(manager)
    for i, info in enumerate(manager.devices):
        transfer.set_device_buffer(i, upload(info.ordinal, pattern(i, nbytes)))
    return transfer, transfer.gather_all()


def test_gathered_arrays_are_pinned_arrays_over_their_blocks(manager, lib):
    _, arrays = gathered(manager, lib.upload, 1 << 16)
    for i, a in enumerate(arrays):
        assert isinstance(a, gpuxfer.PinnedArray) and isinstance(a, np.ndarray)
        assert isinstance(a.base, gpuxfer.PinnedBlock)
        assert (a.base.ptr, a.base.nbytes) == (a.ctypes.data, 1 << 16)
        assert a.pinned and a.__dlpack_device__() == CUDA_HOST
        np.testing.assert_array_equal(a, pattern(i, 1 << 16))


def test_torch_from_dlpack_is_a_pinned_cpu_tensor_over_the_block_which_it_keeps(manager):
    lib = load("torch")
    torch = lib.torch
    nbytes = 1 << 20
    transfer, arrays = gathered(manager, lib.upload, nbytes)
    tensor = torch.from_dlpack(arrays[0])
    part = torch.from_dlpack(arrays[0][1000:3000])
    assert tensor.device.type == "cpu"
    assert tensor.data_ptr() == arrays[0].ctypes.data, "torch.from_dlpack copied the block"
    assert part.data_ptr() == arrays[0].ctypes.data + 1000
    assert tensor.is_pinned(), "the tensor over a gathered block is not pinned memory"
    del transfer, arrays
    gc.collect()
    assert manager.pinned_pool_stats()["in_use"] >= nbytes, "the tensors' block went back while they live"
    np.testing.assert_array_equal(tensor.numpy(), pattern(0, nbytes))
    np.testing.assert_array_equal(part.numpy(), pattern(0, nbytes)[1000:3000])
    del tensor, part
    gc.collect()
    assert manager.pinned_pool_stats()["in_use"] == 0


def test_torch_does_not_import_cuda_host_capsules_which_is_why_the_default_is_kdlcpu(manager):
    # Checks the assumption behind PinnedArray.__dlpack__'s default (gpuxfer/_pinned.py). If torch starts
    # accepting kDLCUDAHost, this fails: then hand out kDLCUDAHost capsules by default.
    lib = load("torch")
    torch = lib.torch
    _, arrays = gathered(manager, lib.upload, 4096)
    capsule = arrays[0].__dlpack__(dl_device=CUDA_HOST, max_version=(1, 0))
    try:
        imported = torch.from_dlpack(capsule)
    except (BufferError, RuntimeError) as refused:
        assert "device_type" in str(refused), refused
    else:
        pytest.fail(f"torch {torch.__version__} imports kDLCUDAHost now (as {imported.device}): make it the default")


def test_cupy_takes_no_host_array_through_dlpack_but_copies_one_exactly(manager):
    lib = load("cupy")
    cupy = lib.cupy
    _, arrays = gathered(manager, lib.upload, 1 << 16)
    with pytest.raises(TypeError):  # cupy 14: "Unsupported array type: 3" (kDLCPU is refused as well)
        cupy.from_dlpack(arrays[0])
    np.testing.assert_array_equal(lib.download(cupy.asarray(arrays[0])), pattern(0, 1 << 16))  # a copy


def test_numpy_from_dlpack_shares_the_block(manager, lib):
    _, arrays = gathered(manager, lib.upload, 4096)
    imported = np.from_dlpack(arrays[0])
    assert imported.ctypes.data == arrays[0].ctypes.data
    np.testing.assert_array_equal(imported, pattern(0, 4096))
