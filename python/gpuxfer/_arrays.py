"""Device tensors as (pointer, bytes): DLPack (``__dlpack__``) first, ``__cuda_array_interface__`` second.

No copy is ever made: a tensor that is not C-contiguous device memory is refused.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from . import _gpuxfer
from ._errors import InvalidArgumentError


class DeviceMemory(NamedTuple):
    ptr: int
    nbytes: int
    device_id: int | None  # the CUDA ordinal, when the producer says
    stream: int | None  # the producer's stream from __cuda_array_interface__ v3, when given


def device_memory(tensor: Any) -> DeviceMemory:
    """Where ``tensor``'s bytes are. Raises InvalidArgumentError for anything but contiguous CUDA memory."""
    if hasattr(type(tensor), "__dlpack__"):
        try:
            view = _gpuxfer._device_view(tensor)
        except TypeError as error:
            raise InvalidArgumentError(str(error)) from error
        if view is not None:
            ptr, nbytes, _device_type, device_id = view
            return DeviceMemory(ptr, nbytes, device_id, None)
    cai = getattr(tensor, "__cuda_array_interface__", None)
    if cai is not None:
        return from_cuda_array_interface(cai)
    raise InvalidArgumentError(
        f"expected a CUDA tensor (__dlpack__ or __cuda_array_interface__), got {type(tensor).__name__}"
    )


def from_cuda_array_interface(cai: dict[str, Any]) -> DeviceMemory:
    """Reads a ``__cuda_array_interface__`` dict (versions 2 and 3)."""
    try:
        ptr, _readonly = cai["data"]
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
    stream = cai.get("stream")
    return DeviceMemory(int(ptr or 0), count * itemsize, None, None if stream is None else int(stream))


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
