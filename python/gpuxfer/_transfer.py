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

    Thread-safe; every blocking call releases the GIL. A registered tensor is kept alive until it is
    replaced or cleared and no operation that may read it is in flight.

    Every gather, copy and broadcast but ``gather_blocking`` has a stream-ordered form, asked for with the
    keyword-only ``stream=`` (a ``torch.cuda.Stream``, a ``cupy.cuda.Stream``, an int handle, 0 being the
    legacy default stream, or an object with ``__cuda_stream__``; left out, the operation is the blocking
    or handle form, never on a default stream). It starts after the work already queued on ``stream``,
    ``stream``'s later work waits for it, and it returns once queued (into pageable host memory, once the
    bytes are there; from it, once host threads have staged them in pinned memory, without waiting for
    ``stream`` when they fit the call's staging ring, 64 MiB with 8 host threads: see the README).
    What it uses (host arrays, caller tensors, the registered tensors) is kept alive by the Transfer until
    ``stream`` gets past it, so dropping them at once is safe; writing a host array or tensor given to it
    before then is not, and neither is closing (or leaving the ``with`` block of) a ``register_host``
    registration of that host memory: the copy goes straight to or from the locked pages, and a
    registration must not end while an operation on its memory is in flight (synchronize ``stream``
    first). Under CUDA graph capture nothing can tell when a replay is done: keep that memory
    alive, and unchanged, for as long as the graph may launch.

    A handle dropped before its operation is done keeps the registered tensors that operation may use
    until it is (a copy may still write one that a later ``clear_device_buffer`` lets go of).

    ``close()`` (or leaving a ``with`` block) ends it at once, as garbage collection would: it waits for the
    streams of what stream-ordered calls keep and for the operations of dropped handles, ends the engine and
    lets go of the registered tensors; then every call raises ``InvalidArgumentError`` and ``manager`` and
    ``closed`` still answer. It is refused while an operation is in flight (another thread's call, a live
    handle whose result is not collected); leaving a ``with`` block on an error lets that error go on
    instead.
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
        """Registers ``tensor`` (``__dlpack__`` or ``__cuda_array_interface__``, C-contiguous, on that
        device) as device ``device``'s buffer, which then belongs to ``stream``: each later operation on it
        waits for the work queued on ``stream`` when that operation starts, and ``stream``'s later work
        waits for the operation's reads and writes of it. ``None`` means the producer's: torch's or cupy's
        current stream on the tensor's device, else the stream ``__cuda_array_interface__`` names, else the
        legacy default stream; where that interface names another stream, that one first waits (on the GPU)
        for it. The registration keeps ``tensor`` and the stream object (not an int handle) alive until it is
        replaced or cleared. A read-only ``tensor`` is refused: broadcasts and copies write registered
        buffers.

        A registration whose stream is ``cudaStreamPerThread`` (``stream=2``, an interface's stream 2, or
        cupy's current stream under ``CUPY_CUDA_PER_THREAD_DEFAULT_STREAM=1``, whose ``.ptr`` is 2) keeps
        CUDA's meaning at each operation, as in C++: it stands for the per-thread default stream, on the
        tensor's device, of the thread that makes the operation, not of the thread that registered. A
        gather from another thread then does not wait for the producer's work: register so only what the
        threads that operate on the buffer produce on their own per-thread streams."""
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
        ``out`` on ``dst_device``; returns where each device's bytes landed. Without ``stream`` it writes
        ``out`` after the work queued on the legacy default stream, on its framework's current stream and on
        the stream its ``__cuda_array_interface__`` names (waited for on the host first, when that is
        another stream) and returns when done; with ``stream`` after that stream's earlier work (and that
        interface's stream, which ``stream`` waits for on the GPU), complete when ``stream`` gets past this
        call (``out`` is kept alive until then). A read-only ``out`` is refused."""
        self._check_open()  # before a host wait that a closed transfer would make for nothing
        memory = device_memory(out, writes="gather_to_device: out")
        order_after_producers([(out, memory)], stream, "gather_to_device")
        return self._gather_to_device(dst_device, memory.ptr, memory.nbytes, stream, out)

    def gather_slices(self, slices: Iterable[Any], out: Any, *, stream: Any = None) -> int:
        """Gathers device tensors (or ``(device, tensor)`` pairs) into the host array ``out``, back to back in
        the order given; returns the bytes written. A bare tensor's device is the manager's device of its
        DLPack device id. Without ``stream`` the slices are read after the work queued on each device's
        legacy default stream, on their framework's current stream there and on the streams their
        ``__cuda_array_interface__`` names (waited for on the host first, when that is another stream).
        With ``stream`` they are read on that stream (after those interfaces' streams, which it waits for on
        the GPU), and into pinned ``out`` it returns at once, the bytes there when ``stream`` gets past this
        call (``out`` and the slices are kept alive until then)."""
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
        """``await``-able gather_blocking: queues the gather (``gather(dst_device, stream=stream)``), then
        polls its handle from the running event loop (no thread per call), backing off from 20 us to 1 ms
        between polls. The queuing itself runs on the loop's thread, as gather() does: it leases the
        results from the pinned pool, so a first gather of a size (pinning new memory, about 150 ms per
        256 MiB) or a pool at its limit (waiting for blocks in use) holds the loop that long. Warm the pool
        with one gather of each size first, or keep the pool's limit above what is in flight."""
        handle = self.gather(dst_device, stream=stream)
        delay = _FIRST_POLL_S
        while not handle.ready():
            await asyncio.sleep(delay)
            delay = min(delay * 2, _LAST_POLL_S)
        return handle.get()

