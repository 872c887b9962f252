"""Device tensors as (pointer, bytes): DLPack (``__dlpack__``) first, ``__cuda_array_interface__`` second.

No copy is ever made: a tensor that is not C-contiguous device memory is refused. An object read through
DLPack that also has ``__cuda_array_interface__`` still gives that interface's stream and read-only flag;
it is read-only where either protocol says so.
"""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

from . import _gpuxfer
from ._errors import InvalidArgumentError


class DeviceMemory(NamedTuple):
    ptr: int
    nbytes: int
    device_id: int | None  # the CUDA ordinal, when the producer says
    stream: int | None  # the producer's stream from __cuda_array_interface__ v3, when given
    readonly: bool = False  # versioned DLPack's read-only flag, or __cuda_array_interface__'s data flag


def device_memory(tensor: Any, writes: str | None = None) -> DeviceMemory:
    """Where ``tensor``'s bytes are. Raises InvalidArgumentError for anything but contiguous CUDA memory,
    and, where ``writes`` names what the call writes (``"gather_to_device: out"``), for a read-only one."""
    memory = _memory_of(tensor)
    if writes is not None and memory.readonly:
        raise InvalidArgumentError(
            f"{writes}: the {type(tensor).__name__} is read-only (its DLPack or __cuda_array_interface__ "
            "says so), and this call would write it"
        )
    return memory


def _memory_of(tensor: Any) -> DeviceMemory:
    if hasattr(type(tensor), "__dlpack__"):
        try:
            view = _gpuxfer._device_view(tensor)
        except TypeError as error:
            raise InvalidArgumentError(str(error)) from error
        if view is not None:
            ptr, nbytes, _device_type, device_id, dlpack_readonly = view
            stream, readonly = _interface_flags(tensor)
            return DeviceMemory(ptr, nbytes, device_id, stream, readonly or dlpack_readonly)
    cai = getattr(tensor, "__cuda_array_interface__", None)
    if cai is not None:
        return from_cuda_array_interface(cai)
    raise InvalidArgumentError(
        f"expected a CUDA tensor (__dlpack__ or __cuda_array_interface__), got {type(tensor).__name__}"
    )


def _interface_flags(tensor: Any) -> tuple[int | None, bool]:
    """(stream, read-only) from the ``__cuda_array_interface__`` of an object DLPack has read, if it has
    one: a consumer must order itself after that stream whichever protocol it read the memory through."""
    try:
        cai = tensor.__cuda_array_interface__
    except Exception:  # none, or refused (torch's for a tensor that requires grad): DLPack's word stands
        return None, False
    if not isinstance(cai, dict):
        return None, False
    data = cai.get("data")
    readonly = isinstance(data, (tuple, list)) and len(data) == 2 and bool(data[1])
    return _stream_of(cai), readonly


def from_cuda_array_interface(cai: dict[str, Any]) -> DeviceMemory:
    """Reads a ``__cuda_array_interface__`` dict (versions 2 and 3)."""
    try:
        ptr, readonly = cai["data"]
        shape = tuple(int(n) for n in cai["shape"])
        itemsize = _itemsize(cai["typestr"])
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidArgumentError(f"__cuda_array_interface__: {error!r} in {cai!r}") from error
    count = 1
    for n in shape:
        count *= n
    strides = cai.get("strides")
    if strides is not None and count > 0 and not _compact(shape, tuple(strides), itemsize):
        raise InvalidArgumentError(
            f"__cuda_array_interface__: strides {tuple(strides)} of shape {shape} are not C-contiguous: "
            "no copy is made behind your back"
        )
    return DeviceMemory(int(ptr or 0), count * itemsize, None, _stream_of(cai), bool(readonly))


def _stream_of(cai: dict[str, Any]) -> int | None:
    """Version 3's ``stream``: None (nothing to wait for), 1 (legacy default), 2 (per-thread default), else
    a ``cudaStream_t`` as an int."""
    stream = cai.get("stream")
    if stream is None:
        return None
    try:
        handle = operator.index(stream) if not isinstance(stream, bool) else -1
    except TypeError:
        handle = -1
    if not 0 <= handle < 1 << 64:
        raise InvalidArgumentError(f"__cuda_array_interface__: stream {stream!r} is not a stream handle")
    return handle


def _itemsize(typestr: str) -> int:
    if not isinstance(typestr, str) or len(typestr) < 3 or not typestr[2:].isdigit():
        raise ValueError(f"typestr {typestr!r}")
    return int(typestr[2:])


def _compact(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    expected = itemsize
    for n, stride in zip(reversed(shape), reversed(strides)):
        if n != 1 and stride != expected:
            return False
        expected *= n
    return True
