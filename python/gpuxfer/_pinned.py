"""Gathered results: numpy arrays over pinned HostBuffers that say so through DLPack.

A ``PinnedArray`` is an ``np.ndarray`` subclass whose ``.base`` is a ``PinnedBlock``: a lease from the
manager's pool (``Transfer``'s gathers) or a view of a ``Communicator`` root's shared segment
(``gather_to_host``); the block goes back when the array, every view of it and every DLPack consumer of
those (a torch tensor from ``torch.from_dlpack``) are gone.

DLPack: ``__dlpack_device__()`` is ``(kDLCUDAHost, 0)``, the truth about the memory. The capsule that
``__dlpack__()`` hands out says kDLCPU unless the consumer asks for ``dl_device=(kDLCUDAHost, 0)``: that is
what torch does for its own pinned tensors, and torch (2.11 included) refuses to import a kDLCUDAHost
capsule ("Unsupported device_type: 3") while it maps kDLCPU to a CPU tensor, which over this memory is
pinned (``is_pinned()``). Both capsules point at the same bytes: no copy either way.

An array that is not over a PinnedBlock any more (a copy, a ufunc's result) is a plain CPU array to DLPack.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _gpuxfer

KDL_CPU = 1
KDL_CUDA_HOST = 3
_UINT8 = np.dtype(np.uint8)


def block_of(array: np.ndarray) -> _gpuxfer.PinnedBlock | None:
    """The PinnedBlock under ``array`` (through its chain of bases), or None."""
    base = array.base
    while isinstance(base, np.ndarray):
        base = base.base
    return base if isinstance(base, _gpuxfer.PinnedBlock) else None


class PinnedArray(np.ndarray):
    """A numpy array over pinned host memory: gpuxfer's pool, or a Communicator root's shared segment
    (``.base`` is its PinnedBlock).

    >>> a = t.gather_all()[0]
    >>> torch.from_dlpack(a).is_pinned()
    True
    """

    @property
    def pinned(self) -> bool:
        """True while this array's bytes are a gpuxfer PinnedBlock's (False for copies and ufunc results).

        >>> a.pinned, a.copy().pinned
        (True, False)
        """
        return block_of(self) is not None

    def __dlpack_device__(self) -> tuple[int, int]:
        if block_of(self) is None:
            return super().__dlpack_device__()
        return (KDL_CUDA_HOST, 0)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        if dl_device is not None and tuple(dl_device) == (KDL_CUDA_HOST, 0):
            if block_of(self) is None:
                raise BufferError("__dlpack__: this array is not pinned memory any more (a copy or a result)")
            if copy:
                raise BufferError("__dlpack__: copy=True to kDLCUDAHost is not supported; copy with numpy")
            if stream is not None and stream != -1:
                raise BufferError(f"__dlpack__: host memory takes no stream, got {stream!r}")
            view = _gpuxfer._cuda_host_view(self, bool(self.flags.writeable))
            versioned = max_version is not None and max_version[0] >= 1
            return view.__dlpack__(max_version=max_version) if versioned else view.__dlpack__()
        # kDLCPU: numpy's own export over the same bytes. Only the keywords given are passed on, so that
        # numpy releases before 2.1 (without dl_device and copy) keep working.
        given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return super().__dlpack__(**{k: v for k, v in given.items() if v is not None})


def _from_block(block: _gpuxfer.PinnedBlock) -> PinnedArray:
    return PinnedArray((block.nbytes,), _UINT8, block)


_gpuxfer._set_pinned_array_factory(_from_block)
