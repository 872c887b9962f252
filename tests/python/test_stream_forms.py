"""The stream-ordered forms (stream=) with torch and with cupy streams, byte for byte, outputs poisoned first.

Each test queues a slow producer on the caller's stream (a ~50 ms spin, then the write the operation depends
on), calls the operation with stream=, and checks both ways of the order: the operation waited for the
producer (it saw the producer's bytes, or its own write landed after the producer's), and the stream's next
work (queued right after the call, no host wait) sees the operation's result. Also handle.stream_wait, the
keep-alive of what a stream-ordered call uses, and the stream= argument checks (these need no GPU).
"""

from __future__ import annotations

import gc
import weakref

import gpuxfer
import numpy as np
import pytest
from conftest import DEVICE_COUNT
from frameworks import POISON, pattern, written_late

NBYTES = (1 << 20) + 5


def sizes(manager):
    return [NBYTES + 13 * i for i in range(manager.device_count)]


def registered_late(transfer, lib, stream, seed):
    """Poisoned tensors registered on every device; device 0's pattern is written by a slow producer on
    stream (of device 0), the others' at once. Returns (tensors, expected bytes per device)."""
    manager = transfer.manager
    tensors, expected = [], []
    for i, (info, n) in enumerate(zip(manager.devices, sizes(manager))):
        data = pattern(i, n, seed)
        tensor = lib.upload(info.ordinal, data) if i else lib.poisoned(info.ordinal, n)
        tensors.append(tensor)
        expected.append(data)
    source = lib.upload(manager.devices[0].ordinal, expected[0])
    lib.synchronize()
    for i, t in enumerate(tensors):
        transfer.set_device_buffer(i, t, stream=0)
    lib.slow_copy_on(stream, tensors[0], source)
    return tensors, expected


def same(got, expected, what):
    np.testing.assert_array_equal(np.asarray(got)[: expected.size], expected, err_msg=what)


def device0_stream(manager, lib):
    return lib.stream(manager.devices[0].ordinal)


def warmed_up(transfer, lib, stream):
    """Poisoned tensors of sizes() registered and gathered once on stream, the results dropped, so that the
    pool holds blocks of those sizes; returns the pool's allocation count. A gather behind a slow producer
    must leave it as it is: a cudaHostAlloc in the call may synchronise the device, ending the producer
    before the gather is queued (and so hiding a gather that did not wait for it)."""
    manager = transfer.manager
    tensors = [lib.poisoned(info.ordinal, n) for info, n in zip(manager.devices, sizes(manager))]
    lib.synchronize()
    for i, t in enumerate(tensors):
        transfer.set_device_buffer(i, t, stream=0)
    for i, a in enumerate(transfer.gather_all(stream=stream).get()):
        assert (a == POISON).all(), f"the warm-up gather, device {i}"
    lib.synchronize()
    return manager.pinned_pool_stats()["allocations"]


def test_gather_all_with_stream_returns_a_handle(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    allocations = warmed_up(transfer, lib, s)
    _, expected = registered_late(transfer, lib, s, seed=11)
    assert lib.busy(s), "the producer was done before the gather was called: nothing to order"
    handle = transfer.gather_all(stream=s)
    assert lib.busy(s), "gather_all(stream=) returned only after the producer it should queue behind"
    assert manager.pinned_pool_stats()["allocations"] == allocations, "the gather allocated pinned memory"
    assert isinstance(handle, gpuxfer.GatherHandle)
    arrays = handle.get()
    assert len(arrays) == manager.device_count
    for i, (a, e) in enumerate(zip(arrays, expected)):
        assert a.size == e.size
        same(a, e, f"device {i}")
    assert isinstance(transfer.gather_all(), list), "without stream= gather_all stays blocking"


def test_gather_with_stream_skips_the_destination(manager2, lib):
    transfer = gpuxfer.Transfer(manager2)
    s = device0_stream(manager2, lib)
    warmed_up(transfer, lib, s)
    _, expected = registered_late(transfer, lib, s, seed=12)
    dst = manager2.device_count - 1
    handle = transfer.gather(dst, stream=s)
    assert lib.busy(s), "gather(stream=) returned only after the producer it should queue behind"
    arrays = handle.get()
    sources = [d for d in range(manager2.device_count) if d != dst]
    assert len(arrays) == len(sources)
    for d, a in zip(sources, arrays):
        same(a, expected[d], f"device {d}")


def test_gather_handle_stream_wait_orders_another_stream(manager, lib):
    """other waits for the gather before overwriting its source: the gather still reads the pattern."""
    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    s, other = lib.stream(ordinal), lib.stream(ordinal)
    tensors, expected = registered_late(transfer, lib, s, seed=13)
    wrong = lib.upload(ordinal, pattern(7, expected[0].size, 13))
    lib.synchronize()
    lib.slow_copy_on(s, tensors[0], lib.upload(ordinal, expected[0]))  # again, now that wrong is ready
    handle = transfer.gather_all(stream=s)
    handle.stream_wait(other)
    lib.copy_on(other, tensors[0], wrong)  # would land long before the gather reads, without the wait
    assert not handle.ready(), "the gather finished before its producer (a ~50 ms spin) could have"
    same(handle.get()[0], expected[0], "device 0, overwritten by a stream that waited")
    lib.synchronize()
    same(lib.download(tensors[0]), pattern(7, expected[0].size, 13), "the overwrite")


def test_gather_into_pinned_with_stream(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    out = np.full(sum(sizes(manager)) + 64, POISON, np.uint8)
    # Registered, and gathered into once, before the producer: cudaHostRegister and a first call's set-up
    # may synchronise the device, which would end the producer before the call and hide a missing wait.
    with gpuxfer.register_host(out):
        warmed_up(transfer, lib, s)
        transfer.gather_into(out, stream=s)
        lib.synchronize()
        assert (out == POISON).all(), "the warm-up gather_into of poisoned buffers"
        _, expected = registered_late(transfer, lib, s, seed=14)
        whole = np.concatenate(expected)
        assert lib.busy(s), "the producer was done before the gather was called: nothing to order"
        pieces = transfer.gather_into(out, stream=s)
        assert lib.busy(s), "gather_into(stream=) into registered memory returned only after the producer"
        assert [p.device for p in pieces] == list(range(manager.device_count))
        after = lib.to_device_on(s, manager.devices[0].ordinal, out)  # s's next work reads out
        lib.synchronize()
        same(out, whole, "gather_into, seen from the host")
        assert (out[whole.size :] == POISON).all(), "gather_into wrote past the pieces"
        same(lib.download(after), whole, "gather_into, seen by the stream's next work")


def test_a_capture_while_an_earlier_calls_keep_alive_is_listed(manager, lib):
    """torch.cuda.graph captures in global mode, where an event query invalidates the capture: a stream-
    ordered call captured while an earlier call's keep-alive is still listed must not reap it then."""
    if lib.name != "torch":
        pytest.skip("captured with torch.cuda.graph")
    torch = lib.torch
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    _, expected = registered_late(transfer, lib, s, seed=21)
    whole = np.concatenate(expected)
    early = np.full(whole.size, POISON, np.uint8)
    out = np.full(whole.size, POISON, np.uint8)
    with gpuxfer.register_host(early), gpuxfer.register_host(out), torch.cuda.device(manager.devices[0].ordinal):
        transfer.gather_into(early, stream=s)  # behind the slow producer: its keep-alive stays listed
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # torch's default: global capture mode, the strictest
            transfer.gather_into(out, stream=torch.cuda.current_stream())
        lib.synchronize()
        same(early, whole, "the earlier call")
        graph.replay()
        torch.cuda.synchronize()
        same(out, whole, "the captured gather_into, replayed")


def test_calls_on_another_thread_leave_a_global_mode_capture_intact(manager, lib):
    """While torch.cuda.graph captures (global mode) on one thread, CUDA refuses the calls it counts unsafe
    (allocating pinned memory, registering, waiting for events and streams) from every thread, and that
    capture is lost. Blocking calls on another thread (gather_to_device and gather_slices waiting on the
    host for that thread's current stream first) and a stream= call there must succeed with the right
    bytes, and the capture must end intact and replay."""
    if lib.name != "torch":
        pytest.skip("captured with torch.cuda.graph")
    torch = lib.torch
    import threading

    transfer = gpuxfer.Transfer(manager)
    n = manager.device_count
    ordinal = manager.devices[0].ordinal
    expected = [pattern(i, NBYTES, 31) for i in range(n)]
    tensors = [lib.upload(info.ordinal, expected[i]) for i, info in enumerate(manager.devices)]
    for i, t in enumerate(tensors):
        transfer.set_device_buffer(i, t)
    sent = pattern(0, NBYTES, 32)
    theirs = device0_stream(manager, lib)
    on_device = torch.empty(n * NBYTES, dtype=torch.uint8, device=f"cuda:{ordinal}")  # made before the capture
    static_in = torch.zeros(NBYTES, dtype=torch.uint8, device=f"cuda:{ordinal}")
    static_out = torch.empty_like(static_in)
    lib.synchronize()
    failures, got = [], {}

    def other():
        steps = [
            ("gather_all", lambda: transfer.gather_all()),
            ("gather_into pageable", lambda: gather_into_poisoned()),
            ("gather_into registered", lambda: gather_into_registered()),
            ("gather_to_device", lambda: transfer.gather_to_device(0, on_device)),
            ("gather_slices", lambda: gather_slices_poisoned()),
            ("broadcast pageable", lambda: transfer.broadcast(sent)),
            ("gather_into after the broadcast, stream=", lambda: gather_into_poisoned(stream=theirs)),
        ]
        with torch.cuda.stream(theirs):  # the blocking forms wait for this thread's current stream
            for name, step in steps:
                try:
                    got[name] = step()
                except Exception as error:  # noqa: BLE001 - every step's failure is reported
                    failures.append(f"{name}: {error!r}")

    def gather_into_poisoned(**stream):
        out = np.full(n * NBYTES, POISON, np.uint8)
        transfer.gather_into(out, **stream)
        return out

    def gather_slices_poisoned():
        out = np.full(n * NBYTES, POISON, np.uint8)
        transfer.gather_slices([(i, t) for i, t in enumerate(tensors)], out)
        return out

    def gather_into_registered():
        out = np.full(n * NBYTES, POISON, np.uint8)
        with gpuxfer.register_host(out):
            transfer.gather_into(out)
        return out

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.device(ordinal):
        with torch.cuda.graph(graph):  # torch's default: global capture mode
            static_out.copy_(static_in)
            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        assert not failures, "\n".join(failures)
        for i in range(n):
            same(got["gather_all"][i], expected[i], f"gather_all, device {i}")
            for name in ("gather_into pageable", "gather_into registered", "gather_slices"):
                same(got[name][i * NBYTES : (i + 1) * NBYTES], expected[i], f"{name}, device {i}")
            piece = got["gather_into after the broadcast, stream="][i * NBYTES : (i + 1) * NBYTES]
            same(piece, sent, f"gather_into after the broadcast, device {i}")
        same(on_device.cpu().numpy(), np.concatenate(expected), "gather_to_device")
        static_in.fill_(7)
        graph.replay()
        torch.cuda.synchronize()
        assert bool((static_out == 7).all()), "the captured copy did not replay"


def test_gather_into_pageable_with_stream_returns_with_the_bytes(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    _, expected = registered_late(transfer, lib, s, seed=15)
    whole = np.concatenate(expected)
    out = np.full(whole.size, POISON, np.uint8)
    transfer.gather_into(out, stream=s)  # pageable: returns once the bytes are there
    same(out, whole, "gather_into pageable")


def test_gather_to_device_with_stream(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    _, expected = registered_late(transfer, lib, s, seed=16)
    whole = np.concatenate(expected)
    out = lib.poisoned(manager.devices[0].ordinal, whole.size + 32)
    pieces = transfer.gather_to_device(0, out, stream=s)
    assert [(p.offset, p.size) for p in pieces] == [
        (sum(e.size for e in expected[:i]), e.size) for i, e in enumerate(expected)
    ]
    after = lib.clone_on(s, out)
    lib.synchronize()
    got = lib.download(after)
    same(got, whole, "gather_to_device, seen by the stream's next work")
    assert (got[whole.size :] == POISON).all()


def test_gather_slices_with_stream(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    s, data, late = written_late(lib, ordinal, 1 << 16, 17)
    starts = [(k * 1031) % ((1 << 16) - 4096) for k in range(32)]
    slices = [(0, late[a : a + 4096 - k]) for k, a in enumerate(starts)]
    expected = np.concatenate([data[a : a + 4096 - k] for k, a in enumerate(starts)])
    out = np.full(expected.size + 8, POISON, np.uint8)
    with gpuxfer.register_host(out):
        assert transfer.gather_slices(slices, out, stream=s) == expected.size
        after = lib.to_device_on(s, ordinal, out)
        lib.synchronize()
        same(out, expected, "gather_slices")
        assert (out[expected.size :] == POISON).all()
        same(lib.download(after), expected, "gather_slices, seen by the stream's next work")


def overwritten_late(transfer, lib, stream, wrong):
    """Poisoned tensors registered on every device; a slow producer on stream then writes wrong into
    device 0's (an operation that writes device 0 must land after it)."""
    manager = transfer.manager
    tensors = [lib.poisoned(info.ordinal, n) for info, n in zip(manager.devices, sizes(manager))]
    source = lib.upload(manager.devices[0].ordinal, wrong)
    lib.synchronize()
    for i, t in enumerate(tensors):
        transfer.set_device_buffer(i, t, stream=0)
    lib.slow_copy_on(stream, tensors[0][: wrong.size], source)
    return tensors


@pytest.mark.parametrize("pinned", [False, True])
@pytest.mark.parametrize("op", ["copy_buffer", "broadcast"])
def test_host_bytes_to_devices_with_stream(manager, lib, op, pinned):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    data = pattern(9, NBYTES - 1001, 20)
    tensors = overwritten_late(transfer, lib, s, pattern(6, NBYTES - 1001, 21))
    host = data.copy()
    registration = gpuxfer.register_host(host) if pinned else None
    if op == "copy_buffer":
        transfer.copy_buffer(0, 0, host, stream=s)
    else:
        transfer.broadcast(host, stream=s)
    # Pinned or pageable (staged before the call returns), the call did not wait for the slow producer;
    # pageable data staged at once only where it fits the ring's slots (2 x host_threads chunks of at most
    # 4 MiB): under a small GPUXFER_CHUNK_BYTES the last chunks wait for the slots' earlier uploads.
    o = manager.options
    if pinned or data.size <= 2 * o.host_threads * min(o.chunk_bytes, 4 << 20):
        assert lib.busy(s), f"{op} pinned={pinned} returned only after the stream's earlier work"
    if not pinned:
        host[:] = POISON  # staged: the caller's memory is free again
    after = lib.clone_on(s, tensors[0])
    lib.synchronize()
    same(lib.download(after), data, f"{op} pinned={pinned}, seen by the stream's next work")
    written = len(tensors) if op == "broadcast" else 1
    for i, t in enumerate(tensors):
        got = lib.download(t)
        if i < written:
            same(got, data, f"{op} pinned={pinned}, device {i}")
            assert (got[data.size :] == POISON).all(), f"{op}: bytes past the data were written"
        else:
            assert (got == POISON).all(), f"{op} touched device {i}"
    del registration


def test_a_stream_ordered_call_keeps_its_host_memory(manager):
    """A pinned CPU tensor dropped right after broadcast(stream=) is not freed (and so not reused by
    torch's pinned cache) before the stream gets past the broadcast."""
    torch = pytest.importorskip("torch")
    from frameworks import Torch

    lib = Torch()
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    data = pattern(3, NBYTES - 7, 22)
    # Pinned first: torch's first cudaHostAlloc may synchronise the device, which would end the slow
    # producer before the broadcast is queued (seen on the H200 runner).
    host = torch.from_numpy(data.copy()).pin_memory()
    alive = weakref.ref(host)
    tensors = overwritten_late(transfer, lib, s, pattern(4, NBYTES - 7, 23))
    transfer.broadcast(host, stream=s)
    assert transfer._kept >= 1, "nothing kept while the stream had not got to the broadcast"
    del host
    gc.collect()  # _kept is not read again before the check: nothing can have been let go
    assert alive() is not None, "the pinned source died while the stream had not got to the broadcast"
    scribble = torch.full((NBYTES - 7,), POISON, dtype=torch.uint8).pin_memory()  # would reuse a freed block
    s.synchronize()
    assert transfer._kept == 0, "what the broadcast used is still kept after its stream got past it"
    gc.collect()
    assert alive() is None
    for i, t in enumerate(tensors):
        same(lib.download(t), data, f"device {i}")
    del scribble


def test_gathered_handles_keep_the_transfer_busy_until_the_stream_passes(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    tensors, expected = registered_late(transfer, lib, s, seed=24)
    alive = weakref.ref(tensors[0])
    handle = transfer.gather_all(stream=s)
    del handle  # dropped unread
    transfer.clear_device_buffer(0)
    del tensors
    gc.collect()
    assert alive() is not None, "a registered tensor died under a stream-ordered gather"
    lib.synchronize()
    assert transfer._kept == 0
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize("path", list(gpuxfer.CopyPath.__members__.values()))
def test_copy_device_buffer_with_stream(manager2, lib, path):
    if path == gpuxfer.CopyPath.peer and not manager2.peer_enabled(0, 1):
        pytest.skip("no peer access 0 -> 1")
    for form in ("copy_device_buffer", "copy_device_buffer_async"):
        transfer = gpuxfer.Transfer(manager2)
        s = device0_stream(manager2, lib)
        tensors, expected = registered_late(transfer, lib, s, seed=25)
        target = lib.poisoned(manager2.devices[1].ordinal, NBYTES + 13 * 2)
        transfer.set_device_buffer(1, target, stream=0)
        handle = getattr(transfer, form)(0, 1, path, stream=s)
        if form == "copy_device_buffer":
            assert handle is None
        else:
            assert isinstance(handle, gpuxfer.TransferHandle)
            other = lib.stream(manager2.devices[1].ordinal)
            handle.stream_wait(other)
            seen = lib.clone_on(other, target)
        lib.synchronize()
        got = lib.download(target)
        same(got, expected[0], f"{form} {path}")
        assert (got[expected[0].size :] == POISON).all()
        if form == "copy_device_buffer_async":
            same(lib.download(seen), expected[0], f"{form} {path}, after stream_wait")
            handle.wait()


@pytest.mark.parametrize("path", list(gpuxfer.DeviceBroadcastPath.__members__.values()))
def test_broadcast_from_device_with_stream(manager2, lib, path):
    if path == gpuxfer.DeviceBroadcastPath.nccl and not manager2.nccl_available:
        pytest.skip("NCCL is not available")
    transfer = gpuxfer.Transfer(manager2)
    s = device0_stream(manager2, lib)
    ordinal0 = manager2.devices[0].ordinal
    data = pattern(0, NBYTES, 26)
    root = lib.poisoned(ordinal0, NBYTES)
    targets = [lib.poisoned(info.ordinal, NBYTES + 64) for info in manager2.devices[1:]]
    source = lib.upload(ordinal0, data)
    lib.synchronize()
    transfer.set_device_buffer(0, root, stream=0)
    for i, t in enumerate(targets, start=1):
        transfer.set_device_buffer(i, t, stream=0)
    lib.slow_copy_on(s, root, source)
    transfer.broadcast_from_device(0, path, stream=s)
    lib.synchronize()
    for i, t in enumerate(targets, start=1):
        got = lib.download(t)
        same(got, data, f"root 0 -> {i}, {path}")
        assert (got[NBYTES:] == POISON).all()


def test_int_and_protocol_streams_work_too(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    s = device0_stream(manager, lib)
    handle = gpuxfer.stream_handle(s)

    class Protocol:
        def __cuda_stream__(self):
            return (0, handle)

    for given in (handle, Protocol()):
        _, expected = registered_late(transfer, lib, s, seed=27)
        for i, a in enumerate(transfer.gather_all(stream=given).get()):
            same(a, expected[i], f"device {i}, stream={type(given).__name__}")


# Argument checks: none of these needs a GPU (the stream is read before anything else).

BAD_STREAM = "not a stream"


@pytest.fixture
def any_transfer():
    return gpuxfer.Transfer(gpuxfer.Manager(min_devices=0))


def stream_forms(t, stream):
    out = np.zeros(16, np.uint8)
    return [
        lambda: t.gather(0, stream=stream),
        lambda: t.gather_all(stream=stream),
        lambda: t.gather_into(out, stream=stream),
        lambda: t.gather_slices([], out, stream=stream),
        lambda: t.copy_buffer(0, 0, b"abc", stream=stream),
        lambda: t.copy_device_buffer(0, 1, stream=stream),
        lambda: t.copy_device_buffer_async(0, 1, stream=stream),
        lambda: t.broadcast(b"abc", stream=stream),
        lambda: t.broadcast_from_device(0, stream=stream),
    ]


def test_every_stream_form_checks_its_stream_first(any_transfer):
    for call in stream_forms(any_transfer, BAD_STREAM):
        with pytest.raises(gpuxfer.InvalidArgumentError, match="stream"):
            call()


def test_stream_is_keyword_only(any_transfer):
    with pytest.raises(TypeError):
        any_transfer.gather(0, 0)
    with pytest.raises(TypeError):
        any_transfer.copy_buffer(0, 0, b"abc", 0)


@pytest.mark.skipif(DEVICE_COUNT > 0, reason="a CUDA device is present: this is the no-GPU path")
def test_without_a_device_the_stream_forms_check_their_indices(any_transfer):
    calls = stream_forms(any_transfer, 0)
    for call in (calls[0], calls[4], calls[5], calls[6], calls[8]):
        with pytest.raises(gpuxfer.InvalidBufferError):
            call()
