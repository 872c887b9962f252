"""``copy_blocks``: many fixed-size blocks between a GPU and pinned host memory, each at its own slot.

The regions are read without copies: CUDA tensors through ``__cuda_array_interface__``, host tensors
and arrays through the buffer they share with numpy (torch CPU tensors through ``.numpy()``). docs/BLOCKS.md
says what the C++ call guarantees.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from . import _gpuxfer
from ._errors import InvalidArgumentError
from ._streams import stream_handle


class _Region(NamedTuple):
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    itemsize: int
    device: bool


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _region(obj: Any, what: str) -> _Region:
    if type(obj).__module__.startswith("torch"):
        obj = obj.detach()  # torch refuses both interfaces for a tensor that requires grad
        if not obj.is_cuda:
            obj = obj.numpy()  # the same memory
    cai = getattr(obj, "__cuda_array_interface__", None)
    interface = cai if cai is not None else getattr(obj, "__array_interface__", None)
    if interface is None:
        raise InvalidArgumentError(
            f"copy_blocks: {what}: expected a CUDA tensor or a host array (torch, cupy, numpy), "
            f"got {type(obj).__name__}"
        )
    ptr = int(interface["data"][0] or 0)
    shape = tuple(int(n) for n in interface["shape"])
    itemsize = int(interface["typestr"][2:])
    strides = interface.get("strides")
    strides = _c_strides(shape, itemsize) if strides is None else tuple(int(s) for s in strides)
    return _Region(ptr, shape, strides, itemsize, cai is not None)


def _layout(r: _Region, layers_first: bool, what: str) -> tuple[tuple[int, int, int, int], int, int]:
    """((base, blocks, block_stride, layer_stride), block_bytes, layers) of a region whose blocks are
    its first dimension (its second with layers_first, the first being the layers); the dimensions
    after the blocks' must be contiguous: they are one block's bytes."""
    lead = 2 if layers_first else 1
    if len(r.shape) < lead:
        raise InvalidArgumentError(f"copy_blocks: {what} has {len(r.shape)} dimensions, needs at least {lead}")
    inner_shape = r.shape[lead:]
    if r.strides[lead:] != _c_strides(inner_shape, r.itemsize) and 0 not in inner_shape:
        raise InvalidArgumentError(
            f"copy_blocks: {what}: a block's dimensions {inner_shape} are not contiguous "
            f"(strides {r.strides[lead:]}): no copy is made behind your back"
        )
    block_bytes = r.itemsize
    for n in inner_shape:
        block_bytes *= n
    if layers_first:
        layers, blocks = r.shape[0], r.shape[1]
        return (r.ptr, blocks, r.strides[1], r.strides[0]), block_bytes, layers
    return (r.ptr, r.shape[0], r.strides[0], block_bytes), block_bytes, 1


def _pairs(pairs: Any) -> tuple[int, int, Any]:
    """(address, count, the object that holds them) of int64 [n, 2] pairs."""
    if isinstance(pairs, (list, tuple)):
        import numpy as np

        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    r = _region(pairs, "pairs")
    count = r.shape[0] if r.shape else 0
    if len(r.shape) != 2 or r.shape[1] != 2 or r.itemsize != 8:
        raise InvalidArgumentError(f"copy_blocks: pairs must be int64 of shape [n, 2], got shape {r.shape}")
    if count > 0 and r.strides != (16, 8):
        raise InvalidArgumentError(f"copy_blocks: pairs must be contiguous, got strides {r.strides}")
    return r.ptr, count, pairs


def copy_blocks(
    src: Any,
    dst: Any,
    pairs: Any,
    *,
    stream: Any = None,
    path: str = "automatic",
    layers_first: bool = False,
    error_flag: Any = None,
) -> str:
    """Copies block ``pairs[k, 0]`` of ``src`` to block ``pairs[k, 1]`` of ``dst`` for every k.

    One region is a CUDA tensor, the other pinned host memory (``pin_memory()``, ``cupyx.empty_pinned``,
    or registered with ``gpuxfer.register_host``), or both are tensors of one GPU. Blocks are the first
    dimension (the second with ``layers_first=True``, the first then being layers, such as a KV cache's
    [2, num_blocks, ...]); the dimensions after them are one block's bytes and must be contiguous. ``pairs``
    is int64 [n, 2] on the host (checked before anything is queued) or on the GPU (read by a kernel that
    skips a pair out of range and sets ``error_flag``, an int32 CUDA or pinned tensor, when given).
    ``stream=None`` waits until the blocks are there (and raises for device pairs out of range); with a
    stream the copy is queued on it and the call returns at once: keep the tensors alive and unchanged
    until the stream gets there. ``path``: automatic, copy_engine, batch or kernel. Returns the path taken.

    >>> cache = torch.empty(4096, 16, 1024, dtype=torch.float16, device="cuda")   # 32 KiB blocks
    >>> spill = torch.empty(8192, 16, 1024, dtype=torch.float16).pin_memory()
    >>> pairs = torch.tensor([[0, 17], [5, 3], [6, 4]])                           # (src, dst) blocks
    >>> path = gpuxfer.copy_blocks(cache, spill, pairs)                           # offload
    >>> gpuxfer.copy_blocks(spill, cache, pairs.flip(1), stream=torch.cuda.current_stream())  # back
    """
    s = _region(src, "src")
    d = _region(dst, "dst")
    src_layout, src_bytes, src_layers = _layout(s, layers_first, "src")
    dst_layout, dst_bytes, dst_layers = _layout(d, layers_first, "dst")
    if src_bytes != dst_bytes or src_layers != dst_layers:
        raise InvalidArgumentError(
            f"copy_blocks: src blocks are {src_layers} x {src_bytes} bytes, dst blocks {dst_layers} x {dst_bytes}"
        )
    address, count, _held = _pairs(pairs)
    flag = 0
    if error_flag is not None:
        f = _region(error_flag, "error_flag")
        if f.itemsize != 4:
            raise InvalidArgumentError("copy_blocks: error_flag must be a 4-byte integer tensor")
        flag = f.ptr
    handle = -1 if stream is None else stream_handle(stream)
    return _gpuxfer._copy_blocks(
        src_layout, dst_layout, address, count, src_bytes, src_layers, handle, path, flag
    )
