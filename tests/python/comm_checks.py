"""Every gpuxfer.Communicator operation checked byte for byte, on any world size: test_communicator.py runs
them in a world of one (this process), comm_ranks.py on each rank of a job under `gpuxfer launch`.

Each check takes the communicator, a framework (frameworks.Torch or Cupy) and a stream: None for the
blocking form, else a stream of the rank's device for the stream-ordered one. Outputs are poisoned first.
In the stream-ordered form the inputs are written by a slow producer on that stream (a ~50 ms spin, then
the write), so that an operation that did not wait for the stream sees poison, and the result is read
after synchronize(stream) alone. Every rank makes the same calls, in the same order, as NCCL requires.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import gpuxfer
import numpy as np
from frameworks import POISON, pattern

SIZE = (1 << 20) + 7
SLACK = 64  # poisoned bytes past every output, which no operation may write


def produce(comm: gpuxfer.Communicator, lib: Any, stream: Any, data: np.ndarray) -> Any:
    """A tensor of data on comm's device. With a stream, written there by a slow producer on it. Create
    the outputs before calling this: it synchronises the device first, so that they are poisoned (comm's
    device only: a rank of several makes no context on the others')."""
    if stream is None:
        return lib.upload(comm.device, data)
    tensor = lib.poisoned(comm.device, data.size)
    source = lib.upload(comm.device, data)
    lib.synchronize(comm.device)
    lib.slow_copy_on(stream, tensor, source)
    return tensor


def finish(comm: gpuxfer.Communicator, stream: Any) -> None:
    if stream is not None:
        comm.synchronize(stream)


def expect(got: np.ndarray, data: np.ndarray, what: str) -> None:
    """got starts with data, and the rest of it is poison."""
    np.testing.assert_array_equal(got[: data.size], data, err_msg=what)
    assert (got[data.size :] == POISON).all(), f"{what}: bytes past the data were written"


def check_broadcast(comm: gpuxfer.Communicator, lib: Any, stream: Any) -> None:
    """buf is the first SIZE bytes of a tensor whose SLACK bytes past it are poison, on every rank: the root's
    bytes arrive everywhere else, and no rank's bytes past buf are written. In a world of one the in-place
    broadcast has no rank to write: what it can show is that the root's bytes, and those past them, are
    left as they were (broadcast_from_host is the check that writes a one-rank world's buffer)."""
    for root in range(comm.world_size):
        data = pattern(root, SIZE, 1)
        if comm.rank == root:
            whole = produce(comm, lib, stream, np.concatenate([data, np.full(SLACK, POISON, np.uint8)]))
        else:
            whole = lib.poisoned(comm.device, SIZE + SLACK)
            lib.synchronize(comm.device)
        comm.broadcast(whole[:SIZE], root, stream=stream)
        finish(comm, stream)
        expect(lib.download(whole), data, f"broadcast from {root}")


def check_all_gather(comm: gpuxfer.Communicator, lib: Any, stream: Any) -> None:
    n = comm.world_size
    recv = lib.poisoned(comm.device, n * SIZE + SLACK)
    send = produce(comm, lib, stream, pattern(comm.rank, SIZE, 2))
    comm.all_gather(send, recv, stream=stream)
    finish(comm, stream)
    got = lib.download(recv)
    for r in range(n):
        part = got[r * SIZE : (r + 1) * SIZE]
        np.testing.assert_array_equal(part, pattern(r, SIZE, 2), err_msg=f"all_gather, rank {r}")
    assert (got[n * SIZE :] == POISON).all(), "all_gather wrote past the ranks' bytes"


def gather_sizes(world_size: int) -> list[int]:
    return [SIZE + 13 * r for r in range(world_size)]


def check_gather(comm: gpuxfer.Communicator, lib: Any, stream: Any) -> None:
    sizes = gather_sizes(comm.world_size)
    offsets = [sum(sizes[:r]) for r in range(comm.world_size)]
    for root in range(comm.world_size):
        recv = lib.poisoned(comm.device, sum(sizes) + SLACK) if comm.rank == root else None
        send = produce(comm, lib, stream, pattern(comm.rank, sizes[comm.rank], 3))
        pieces = comm.gather(send, recv, root, stream=stream)
        finish(comm, stream)
        assert [tuple(p) for p in pieces] == list(zip(range(comm.world_size), offsets, sizes)), pieces
        if comm.rank == root:
            parts = [pattern(r, s, 3) for r, s in enumerate(sizes)]
            expect(lib.download(recv), np.concatenate(parts), f"gather to {root}")


def check_copy(comm: gpuxfer.Communicator, lib: Any, stream: Any) -> None:
    src, dst = 0, comm.world_size - 1
    data = pattern(src, SIZE, 4)
    recv = lib.poisoned(comm.device, SIZE) if comm.rank == dst else None
    send = produce(comm, lib, stream, data) if comm.rank == src else None
    if send is None:
        lib.synchronize(comm.device)
    comm.copy(src, dst, send, recv, stream=stream)
    finish(comm, stream)
    if comm.rank == dst:
        np.testing.assert_array_equal(lib.download(recv), data, err_msg=f"copy {src} -> {dst}")


def host_gather_sizes(world_size: int) -> list[int]:
    """As gather_sizes, but rank 1 (where there is one) sends nothing."""
    return [0 if r == 1 else s for r, s in enumerate(gather_sizes(world_size))]


# gather_to_host's seeds, one per call: its results lie in reused memory (the root's shared segments), which
# a call that wrote nothing would find holding an earlier call's bytes. Every rank makes the same calls in
# the same order, and so draws the same seeds.
_GATHER_TO_HOST_SEEDS = itertools.count(500)


def check_gather_to_host(comm: gpuxfer.Communicator, lib: Any, stream: Any) -> None:
    sizes = host_gather_sizes(comm.world_size)
    for root in range(comm.world_size):
        seed = next(_GATHER_TO_HOST_SEEDS)
        send = produce(comm, lib, stream, pattern(comm.rank, sizes[comm.rank], seed))
        arrays = comm.gather_to_host(send, root, stream=stream)
        finish(comm, stream)
        if comm.rank != root:
            assert arrays == [], f"gather_to_host gave rank {comm.rank} (not the root) {len(arrays)} arrays"
            continue
        assert len(arrays) == comm.world_size, f"{len(arrays)} arrays for {comm.world_size} ranks"
        for r, (array, size) in enumerate(zip(arrays, sizes)):
            assert isinstance(array, gpuxfer.PinnedArray) and array.dtype == np.uint8, type(array)
            assert array.shape == (size,), f"rank {r}: {array.shape} bytes, expected {size}"
            np.testing.assert_array_equal(array, pattern(r, size, seed), err_msg=f"gather_to_host, rank {r}")
            array[:] = POISON  # what a later call finds there, if it writes nothing


def host_data(kind: str, data: np.ndarray) -> Any:
    if kind == "bytes":
        return data.tobytes()
    if kind == "torch":
        import torch

        return torch.from_numpy(data.copy())
    return data


def check_broadcast_from_host(comm: gpuxfer.Communicator, lib: Any, stream: Any, kind: str = "numpy") -> None:
    for root in range(comm.world_size):
        data = pattern(root, SIZE - 5, 6)
        recv, poison = lib.poisoned(comm.device, SIZE), lib.poisoned(comm.device, SIZE)
        lib.synchronize(comm.device)
        if stream is not None:
            # A slow write of poison queued first: a broadcast that did not wait for it is overwritten.
            lib.slow_copy_on(stream, recv, poison)
        source = host_data(kind, data) if comm.rank == root else None
        comm.broadcast_from_host(source, recv, root, stream=stream)
        finish(comm, stream)
        expect(lib.download(recv), data, f"broadcast_from_host from {root}, {kind}")


OPERATIONS: dict[str, Callable[[gpuxfer.Communicator, Any, Any], None]] = {
    "broadcast": check_broadcast,
    "all_gather": check_all_gather,
    "gather": check_gather,
    "copy": check_copy,
    "gather_to_host": check_gather_to_host,
    "broadcast_from_host": check_broadcast_from_host,
}
