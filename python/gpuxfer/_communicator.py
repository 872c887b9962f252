"""gpuxfer.Communicator: the C++ Communicator (one rank of a job over NCCL), tensors read in Python."""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np

from . import _gpuxfer
from ._arrays import DeviceMemory, device_memory
from ._errors import InvalidArgumentError, UnsupportedError
from ._pinned import PinnedArray
from ._streams import order_after_producers

_NO_MEMORY = DeviceMemory(0, 0, None, None)


class Communicator(_gpuxfer._Communicator):
    """One rank of a job of several processes, each driving one GPU, joined by an NCCL communicator.

    Every operation is collective: each rank calls it, in the same order, with agreeing arguments. Without
    ``stream=`` an operation returns when the data is in place; with it, once queued (wait with
    ``synchronize(stream)``, bounded by the timeout). Ordering, lifetimes, CUDA graphs and the end of a
    communicator are in docs/PYTHON.md and docs/PROCESSES.md.

    >>> with gpuxfer.Communicator.from_environment() as comm:   # under `gpuxfer launch -n 2 -- python x.py`
    ...     comm.broadcast(x, root=0)
    """

    def __init__(
        self,
        rank: int,
        world_size: int,
        init_address: str = "",
        device: int | None = None,
        timeout: float | datetime.timedelta | None = None,
    ) -> None:
        """Joins as ``rank`` of ``world_size`` ranks meeting at ``init_address`` (``tcp://host:port``, where
        rank 0 listens, or ``file:///path``; may be empty for one rank). ``device`` defaults to the rank,
        ``timeout`` (seconds or a ``timedelta``, bounding every wait) to ``GPUXFER_TIMEOUT``, else 300 s.
        Collective: returns once every rank has joined.

        >>> comm = gpuxfer.Communicator(rank, 2, "tcp://10.0.0.1:29500")"""
        super().__init__(rank, world_size, init_address, device, _milliseconds(timeout))

    @classmethod
    def from_environment(
        cls, device: int | None = None, timeout: float | datetime.timedelta | None = None
    ) -> Communicator:
        """Joins the job the launcher's environment describes (``gpuxfer launch``, torchrun, Slurm, Open MPI;
        with none set, a job of one process). ``device`` defaults to the local rank.

        >>> comm = gpuxfer.Communicator.from_environment()"""
        communicator = cls.__new__(cls)
        _gpuxfer._Communicator.__init__(communicator, None, None, "", device, _milliseconds(timeout))
        return communicator

    def __enter__(self) -> Communicator:
        return self

    def __exit__(self, *exception: object) -> None:
        self.close()

    def broadcast(self, buf: Any, root: int, *, stream: Any = None) -> None:
        """Copies ``root``'s ``buf`` into every other rank's ``buf``, in place (the same size everywhere).

        >>> comm.broadcast(x, root=0)"""
        memory = device_memory(buf, writes=None if self.rank == root else "broadcast: buf")
        self._ordered(stream, [(buf, memory)], self._broadcast, memory.ptr, memory.nbytes, root, used=buf)

    def all_gather(self, send: Any, recv: Any, *, stream: Any = None) -> None:
        """Every rank's ``send`` (the same size on every rank) into every rank's ``recv``, rank r's at offset
        r * send's bytes.

        >>> comm.all_gather(x, torch.empty(comm.world_size * x.numel(), dtype=x.dtype, device=x.device))"""
        source, target = device_memory(send), device_memory(recv, writes="all_gather: recv")
        args = (source.ptr, source.nbytes, target.ptr, target.nbytes)
        self._ordered(stream, [(send, source), (recv, target)], self._all_gather, *args, used=(send, recv))

    def gather(self, send: Any, recv: Any, root: int, *, stream: Any = None) -> list[_gpuxfer.GatherPiece]:
        """Concatenates every rank's ``send`` (sizes may differ), ascending by rank, into ``root``'s ``recv``
        (``None`` allowed on the other ranks, where it is not read); returns on every rank where each rank's
        bytes land (``GatherPiece.device`` is the rank).

        >>> pieces = comm.gather(x, out, root=0)"""
        mine = self.rank == root
        source, target = device_memory(send), _optional_memory(recv, "gather: recv" if mine else None)
        args = (source.ptr, source.nbytes, target.ptr, target.nbytes, root)
        arrays = [(send, source), (recv, target)] if mine else [(send, source)]
        return self._ordered(stream, arrays, self._gather, *args, used=(send, recv))

    def copy(self, src: int, dst: int, send: Any, recv: Any, *, stream: Any = None) -> None:
        """Copies rank ``src``'s ``send`` into rank ``dst``'s ``recv``. ``send`` is read on ``src`` only and
        ``recv`` written on ``dst`` only (``None`` allowed elsewhere); the bytes are ``send``'s on ``src``
        and ``recv``'s on ``dst``, which must agree, as for torch.distributed's send and recv: no rank knows
        the other's size, and NCCL waits for bytes that never come (until the timeout) where ``recv`` is
        larger. A copy from a rank to itself refuses sizes that differ. The other ranks return at once.

        >>> comm.copy(0, 1, x, y)"""
        source = device_memory(send) if self.rank == src else _optional_memory(send)
        target = device_memory(recv, "copy: recv") if self.rank == dst else _optional_memory(recv)
        nbytes = _copy_bytes(self.rank, src, dst, source.nbytes, target.nbytes)
        mine = ([(send, source)] if self.rank == src else []) + ([(recv, target)] if self.rank == dst else [])
        args = (src, dst, source.ptr, target.ptr, nbytes)
        self._ordered(stream, mine, self._copy, *args, used=(send, recv))

    def gather_to_host(self, send: Any, root: int, *, stream: Any = None) -> list[PinnedArray]:
        """Gathers every rank's ``send`` (sizes may differ, 0 included) to ``root``'s host: on the root one
        1-D uint8 ``PinnedArray`` per rank, in rank order, over the page-locked memory the C++ call returned
        (no copy; the array keeps it alive and may outlive the communicator; a rank that sent nothing gives
        an empty array), on the other ranks an empty list. With ``stream`` the arrays are returned at once
        and hold the bytes once the root's ``stream`` gets past this call.

        >>> arrays = comm.gather_to_host(x, root=0)"""
        source = device_memory(send)
        arrays = self._ordered(
            stream, [(send, source)], self._gather_to_host, source.ptr, source.nbytes, root, used=send
        )
        return [PinnedArray((0,), np.uint8) if a is None else a for a in arrays]

    def broadcast_from_host(self, data: Any, recv: Any, root: int, *, stream: Any = None) -> None:
        """Copies ``root``'s host ``data`` (bytes-like, numpy, CPU tensor; pageable or page-locked; ``None``
        allowed on the other ranks, where it is not read) into every rank's ``recv``, the root's too; the
        bytes of ``recv`` past them are left alone. With ``stream``, the root may reuse ``data`` when the
        call returns, except when no other rank shares its node and ``data`` is page-locked: then it is
        read on the GPU and must stay unchanged until the root's ``stream`` gets past this call.

        >>> comm.broadcast_from_host(data if comm.rank == 0 else None, x, root=0)"""
        target = device_memory(recv, writes="broadcast_from_host: recv")
        args = (data, target.ptr, target.nbytes, root)
        self._ordered(stream, [(recv, target)], self._broadcast_from_host, *args, used=(data, recv))

    def _ordered(
        self, stream: Any, arrays: list[tuple[Any, DeviceMemory]], operation: Any, *args: Any, used: Any
    ) -> Any:
        """``operation(*args, stream=stream, used=used)`` after the producers of ``arrays`` (the (tensor,
        memory) pairs this rank touches; ``order_after_producers``). Without ``stream=``, the C++ blocking
        form (``stream=None``, after the legacy default stream), after host waits (``synchronize``) for
        their framework's current stream and their ``__cuda_array_interface__`` stream where those are
        other streams; with it, ``stream`` first waits on the GPU for the latter. The form never depends
        on the current stream: the blocking and stream-ordered host operations exchange different steps
        with the other ranks."""
        where = f"rank {self.rank} of {self.world_size}: an operation"

        def host_wait(handle: int, _ordinal: int, what: str) -> None:
            try:
                self.synchronize(handle)  # on this rank's device, bounded by the timeout
            except UnsupportedError as error:  # the stream captures
                raise UnsupportedError(f"{what} {_gpuxfer._BLOCKING_UNDER_CAPTURE}") from error

        order_after_producers(arrays, stream, where, host_wait)
        return operation(*args, stream=stream, used=used)


def _copy_bytes(rank: int, src: int, dst: int, send_bytes: int, recv_bytes: int) -> int:
    """The bytes ``rank`` moves in ``copy(src, dst, ...)``: ``send``'s on ``src``, ``recv``'s on ``dst``;
    a rank that is both refuses sizes that differ (its one C++ call takes one size: a smaller ``recv``
    would be overrun)."""
    if rank == src == dst and send_bytes != recv_bytes:
        raise InvalidArgumentError(
            f"rank {rank}: copy from rank {src} to itself: send has {send_bytes} bytes, recv {recv_bytes}: "
            "they must agree"
        )
    return send_bytes if rank == src else recv_bytes


def _optional_memory(tensor: Any, writes: str | None = None) -> DeviceMemory:
    return _NO_MEMORY if tensor is None else device_memory(tensor, writes)


def _milliseconds(timeout: Any) -> int | None:
    """``timeout`` (seconds, or a ``timedelta``) in whole milliseconds; the C++ side refuses below 1 ms."""
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        seconds = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        seconds = float(timeout)
    else:
        raise InvalidArgumentError(
            f"timeout: expected seconds (a number) or a datetime.timedelta, got {type(timeout).__name__}"
        )
    if not math.isfinite(seconds) or abs(seconds) >= 1e15:
        raise InvalidArgumentError(f"timeout: {timeout!r} is not a duration in range")
    return int(seconds * 1000)
