"""gpuxfer.Transfer: the C++ InterGpuTransfer, with tensors and streams read on the Python side."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from . import _gpuxfer
from ._arrays import device_memory
from ._errors import InvalidArgumentError
from ._streams import current_stream_of, order_after_producers, stream_handle

_FIRST_POLL_S = 20e-6
_LAST_POLL_S = 1e-3


class Transfer(_gpuxfer._Transfer):
    """Gathers, copies and broadcasts the tensors registered on each device of a Manager.

    Thread-safe; every blocking call releases the GIL. Each operation but ``gather_blocking`` also has a
    stream-ordered form, asked for with the keyword ``stream=``: it is queued after that stream's work
    and returns at once. What stays alive, and when data is ready, is in docs/PYTHON.md.

    >>> with gpuxfer.Transfer(gpuxfer.Manager()) as t:
    ...     t.set_device_buffer(0, torch.ones(1024, device="cuda:0"))
    ...     arrays = t.gather_all()
    """

    def __enter__(self) -> Transfer:
        return self

    def __exit__(self, kind: object, value: object, traceback: object) -> None:
        try:
            self.close()
        except InvalidArgumentError:
            if kind is None:
                raise
            # The block's own error goes on (its frame may hold the handle that refused the close);
            # garbage collection ends the transfer once that handle is gone.

    def set_device_buffer(self, device: int, tensor: Any, stream: Any = None) -> None:
        """Registers ``tensor`` (a CUDA tensor on that device, C-contiguous, writable) as device ``device``'s
        buffer; later operations on it are ordered with ``stream`` (None: the tensor's framework's current
        stream). The registration keeps ``tensor`` alive until it is replaced or cleared; docs/PYTHON.md
        says how ``cudaStreamPerThread`` (``stream=2``) is read.

        >>> t.set_device_buffer(0, torch.arange(256, dtype=torch.uint8, device="cuda:0"))"""
        memory = device_memory(tensor, writes="set_device_buffer (broadcasts and copies write it)")
        if stream is None:
            stream = current_stream_of(tensor)
        if stream is not None:
            handle = stream_handle(stream)
        else:
            handle = memory.stream if memory.stream is not None else 0
        order_after_producers([(tensor, memory)], handle, "set_device_buffer")
        owner = None if isinstance(stream, int) else stream
        self._set_device_buffer(device, memory.ptr, memory.nbytes, handle, tensor, owner)

    def gather_to_device(
        self, dst_device: int, out: Any, *, stream: Any = None
    ) -> list[_gpuxfer.GatherPiece]:
        """Concatenates every device's buffer (``dst_device``'s included, ascending) into the CUDA tensor
        ``out`` on ``dst_device``; returns one GatherPiece (device, offset, size) per device. Returns when
        done, or with ``stream=`` once queued on it (``out`` kept alive until ``stream`` gets past it).

        >>> out = torch.empty(total_bytes, dtype=torch.uint8, device="cuda:0")
        >>> pieces = t.gather_to_device(0, out)"""
        self._check_open()  # before a host wait that a closed transfer would make for nothing
        memory = device_memory(out, writes="gather_to_device: out")
        order_after_producers([(out, memory)], stream, "gather_to_device")
        return self._gather_to_device(dst_device, memory.ptr, memory.nbytes, stream, out)

    def gather_slices(self, slices: Iterable[Any], out: Any, *, stream: Any = None) -> int:
        """Gathers device tensors (or ``(device, tensor)`` pairs) into the host array ``out``, back to back
        in the order given; returns the bytes written. With ``stream=`` they are read on that stream and,
        into pinned ``out``, the call returns at once.

        >>> n = t.gather_slices([x0[:100], (1, x1[200:300])], out)"""
        self._check_open()
        ordinals = None
        ranges = []
        tensors = []
        memories = []
        for entry in slices:
            device, tensor = entry if isinstance(entry, tuple) and len(entry) == 2 else (None, entry)
            memory = device_memory(tensor)
            if device is None:
                if ordinals is None:
                    ordinals = [info.ordinal for info in self.manager.devices]
                if memory.device_id not in ordinals:
                    raise InvalidArgumentError(
                        f"gather_slices: cannot tell the device of a {type(tensor).__name__} "
                        f"(CUDA device {memory.device_id}): pass (device, tensor)"
                    )
                device = ordinals.index(memory.device_id)
            ranges.append((device, memory.ptr, memory.nbytes))
            tensors.append(tensor)
            memories.append(memory)
        order_after_producers(zip(tensors, memories), stream, "gather_slices")
        return self._gather_slices(ranges, out, stream, tensors if stream is not None else None)

    async def gather_async(self, dst_device: int, *, stream: Any = None) -> list[Any]:
        """``await``-able gather_blocking: queues ``gather(dst_device)`` and polls its handle from the event
        loop (20 us to 1 ms between polls, no thread per call). The queuing runs on the loop's thread: a
        first gather of a size pins new memory (about 150 ms per 256 MiB), so warm the pool first.

        >>> arrays = await t.gather_async(0)"""
        handle = self.gather(dst_device, stream=stream)
        delay = _FIRST_POLL_S
        while not handle.ready():
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_POLL_S)
        return handle.get()

