"""Zero copy and lifetimes: registered tensors are used in place and kept alive; gathered arrays are the
pinned blocks themselves and keep them leased; dropping everything returns the pool to 0 in use.
Also the producer's stream (torch, cupy, int handle, __cuda_stream__) orders the reads."""

from __future__ import annotations

import gc
import time
import weakref

import gpuxfer
import numpy as np
import pytest
from frameworks import POISON, pattern, written_late


def test_a_registered_tensor_is_used_in_place(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    t = lib.upload(manager.devices[0].ordinal, pattern(0, 1 << 16))
    transfer.set_device_buffer(0, t)
    assert transfer.registered_range(0) == (lib.pointer(t), 1 << 16)
    assert transfer.device_buffer(0) is t


def test_a_registered_tensor_outlives_the_callers_reference(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    t = lib.upload(manager.devices[0].ordinal, pattern(0, 1 << 20))
    transfer.set_device_buffer(0, t)
    alive = weakref.ref(t)
    del t
    gc.collect()
    assert alive() is not None, "the registration let its tensor die"
    # Memory freed now would be handed to this allocation; the gather must still see the pattern.
    decoy = lib.poisoned(manager.devices[0].ordinal, 1 << 20)
    np.testing.assert_array_equal(transfer.gather_all()[0], pattern(0, 1 << 20))
    transfer.clear_device_buffer(0)
    gc.collect()
    assert alive() is None, "clear_device_buffer kept its tensor"
    assert transfer.registered_range(0) is None
    del decoy


def test_replacing_a_registration_drops_the_old_tensor(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    first = lib.upload(manager.devices[0].ordinal, pattern(0, 4096))
    transfer.set_device_buffer(0, first)
    alive = weakref.ref(first)
    del first
    transfer.set_device_buffer(0, lib.upload(manager.devices[0].ordinal, pattern(0, 4096, 2)))
    gc.collect()
    assert alive() is None
    np.testing.assert_array_equal(transfer.gather_all()[0], pattern(0, 4096, 2))


def test_a_finalizer_of_the_replaced_tensor_may_register_on_the_same_transfer(manager, lib):
    """The tensor a registration replaces is dropped once set_device_buffer has let go of the Transfer's
    registration lock, so a finalizer it runs may register on the same Transfer (dropped under the lock,
    the finalizer's call waited for that lock on the thread that held it)."""
    import threading

    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    first = lib.upload(ordinal, pattern(0, 4096))
    last = lib.upload(ordinal, pattern(0, 4096, 3))
    transfer.set_device_buffer(0, first)
    weakref.finalize(first, transfer.set_device_buffer, 0, last)
    del first
    done = threading.Event()

    def replace():
        transfer.set_device_buffer(0, lib.upload(ordinal, pattern(0, 4096, 2)))
        done.set()

    # A thread of its own, so that a call that never returns fails the test instead of holding it.
    threading.Thread(target=replace, daemon=True).start()
    assert done.wait(30), "set_device_buffer did not return: the finalizer of the tensor it replaced waits"
    assert transfer.device_buffer(0) is last
    np.testing.assert_array_equal(transfer.gather_all()[0], pattern(0, 4096, 3))


def test_two_threads_registering_one_device_leave_the_tensor_of_the_registration_held(manager, lib):
    """The C++ registration and the tensor Python holds for it change together: with the GIL let go of
    during set_device_buffer, two threads could register in one order and hold in the other, leaving the
    registered tensor unheld (its memory free for the framework to reuse under gpuxfer). Rounds of two
    threads let go at once, each registering its tensor; after each round the two must agree."""
    import threading

    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    tensors = [lib.upload(ordinal, pattern(0, 4096, seed)) for seed in (1, 2)]
    start = threading.Barrier(2)

    def register(t):
        start.wait()
        transfer.set_device_buffer(0, t)

    disagreed = 0
    for _ in range(500):
        threads = [threading.Thread(target=register, args=(t,)) for t in tensors]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        disagreed += lib.pointer(transfer.device_buffer(0)) != transfer.registered_range(0)[0]
    assert disagreed == 0, f"{disagreed} of 500 rounds left another tensor held than the one registered"


def test_gathered_arrays_are_the_pinned_blocks_and_keep_them(manager, lib):
    torch = pytest.importorskip("torch")
    transfer = gpuxfer.Transfer(manager)
    for i, info in enumerate(manager.devices):
        transfer.set_device_buffer(i, lib.upload(info.ordinal, pattern(i, 1 << 20)))
    arrays = transfer.gather_all()
    assert manager.pinned_pool_stats()["in_use"] >= len(arrays) << 20
    as_tensor = torch.from_numpy(arrays[0])
    assert as_tensor.data_ptr() == arrays[0].ctypes.data  # no copy on the way to torch either
    assert as_tensor.is_pinned(), "a gathered array is not pinned memory"
    view = arrays[0][1000:2000]
    del transfer, arrays, as_tensor
    gc.collect()
    assert manager.pinned_pool_stats()["in_use"] >= 1 << 20, "a view's block went back to the pool"
    np.testing.assert_array_equal(view, pattern(0, 1 << 20)[1000:2000])
    del view
    gc.collect()
    assert manager.pinned_pool_stats()["in_use"] == 0


def test_dropping_everything_returns_the_pool_to_zero(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    for i, info in enumerate(manager.devices):
        transfer.set_device_buffer(i, lib.upload(info.ordinal, pattern(i, 3 << 20)))
    handle = transfer.gather(0)
    arrays = transfer.gather_all()
    out = np.full(manager.device_count * (3 << 20), POISON, np.uint8)
    transfer.gather_into(out)
    handle.wait()
    del handle, arrays, transfer
    gc.collect()
    assert manager.pinned_pool_stats()["in_use"] == 0


def warmed_up(transfer, t):
    """Registers t (poisoned) on the legacy default stream and gathers it once, dropping the result, so
    that the pool holds a block of t's size; returns the pool's allocation count. A gather behind a slow
    producer must leave that count as it is: a cudaHostAlloc in the call may synchronise the device, which
    ends the producer before the gather is queued, and a gather that ignored the producer's stream would
    pass."""
    transfer.set_device_buffer(0, t, stream=0)
    assert (transfer.gather_all()[0] == POISON).all(), "the warm-up gather of a poisoned tensor"
    return transfer.manager.pinned_pool_stats()["allocations"]


def gathered_behind(transfer, lib, stream, allocations):
    """gather_all()'s array of device 0, after checking that stream is still busy with its producer as the
    call starts and that the call allocated no pinned memory (see warmed_up)."""
    assert lib.busy(stream), "the producer was done before the gather was called: nothing to order"
    got = transfer.gather_all()[0]
    assert transfer.manager.pinned_pool_stats()["allocations"] == allocations, "the gather allocated"
    return got


@pytest.mark.parametrize("form", ["object", "int", "protocol"])
def test_the_producer_stream_orders_the_gather(manager, lib, form):
    class Protocol:
        def __init__(self, handle):
            self.handle = handle

        def __cuda_stream__(self):
            return (0, self.handle)

    ordinal = manager.devices[0].ordinal
    stream = lib.stream(ordinal)
    handle = gpuxfer.stream_handle(stream)
    given = {"object": stream, "int": handle, "protocol": Protocol(handle)}[form]
    transfer = gpuxfer.Transfer(manager)
    t = lib.poisoned(ordinal, 8 << 20)
    lib.synchronize()
    allocations = warmed_up(transfer, t)
    lib.write_on(stream, t, pattern(0, 8 << 20, 11))  # queued behind a spin: still poison now
    transfer.set_device_buffer(0, t, stream=given)
    got = gathered_behind(transfer, lib, stream, allocations)
    np.testing.assert_array_equal(got, pattern(0, 8 << 20, 11))


def test_without_stream_the_frameworks_current_stream_orders_the_gather(manager, lib):
    ordinal = manager.devices[0].ordinal
    stream = lib.stream(ordinal)
    transfer = gpuxfer.Transfer(manager)
    t = lib.poisoned(ordinal, 8 << 20)
    lib.synchronize()
    allocations = warmed_up(transfer, t)
    with lib.current(stream):
        lib.write_on(stream, t, pattern(0, 8 << 20, 12))  # behind a spin on the current stream
        transfer.set_device_buffer(0, t)  # stream=None: the framework's current stream
    got = gathered_behind(transfer, lib, stream, allocations)
    np.testing.assert_array_equal(got, pattern(0, 8 << 20, 12))


def test_a_registration_keeps_its_stream_object_until_cleared(manager, lib):
    ordinal = manager.devices[0].ordinal
    stream = lib.stream(ordinal)  # a torch.cuda.Stream, a cupy.cuda.Stream (destroyed when it dies)
    alive = weakref.ref(stream)
    transfer = gpuxfer.Transfer(manager)
    t = lib.poisoned(ordinal, 8 << 20)
    lib.synchronize()
    allocations = warmed_up(transfer, t)
    transfer.set_device_buffer(0, t, stream=stream)
    expected = pattern(0, 8 << 20, 13)
    lib.write_on(stream, t, expected)  # behind a spin on the stream, after the registration: still its order
    # Reference counting frees an object at once; a full gc.collect() here could outlast the spin.
    del stream
    assert alive() is not None, "the registration let the caller's stream object die"
    got = gathered_behind(transfer, lib, alive(), allocations)
    np.testing.assert_array_equal(got, expected)
    gc.collect()
    assert alive() is not None, "the registration let the caller's stream object die"
    transfer.set_device_buffer(0, t, stream=0)  # replaced: an int handle holds nothing
    gc.collect()
    assert alive() is None, "a replaced registration kept its stream object"


def test_without_stream_the_current_stream_object_is_held(manager, lib):
    ordinal = manager.devices[0].ordinal
    stream = lib.stream(ordinal)
    alive = weakref.ref(stream)
    transfer = gpuxfer.Transfer(manager)
    t = lib.poisoned(ordinal, 1 << 20)
    with lib.current(stream):
        transfer.set_device_buffer(0, t)
    del stream
    gc.collect()
    if lib.name == "cupy":  # cupy's current stream is the caller's object; torch's is a new wrapper
        assert alive() is not None, "the registration let cupy's current stream object die"
    transfer.clear_device_buffer(0)
    gc.collect()
    assert alive() is None, "a cleared registration kept its stream object"


# --- close() ------------------------------------------------------------------------------------------


def test_close_lets_go_of_the_registrations_and_every_later_call_says_so(manager, lib):
    ordinal = manager.devices[0].ordinal
    with gpuxfer.Transfer(manager) as transfer:
        assert not transfer.closed
        t = lib.upload(ordinal, pattern(0, 4096))
        transfer.set_device_buffer(0, t)
        alive = weakref.ref(t)
        del t
    assert transfer.closed
    assert transfer.manager.device_count == manager.device_count
    gc.collect()
    assert alive() is None, "close kept the registered tensor"
    t = lib.upload(ordinal, pattern(0, 4096))
    host = np.full(4096, POISON, np.uint8)
    calls = {
        "set_device_buffer": lambda: transfer.set_device_buffer(0, t),
        "clear_device_buffer": lambda: transfer.clear_device_buffer(0),
        "device_buffer": lambda: transfer.device_buffer(0),
        "registered_range": lambda: transfer.registered_range(0),
        "gather": lambda: transfer.gather(0),
        "gather_blocking": lambda: transfer.gather_blocking(0),
        "gather_all": lambda: transfer.gather_all(),
        "gather_into": lambda: transfer.gather_into(host),
        "gather_slices": lambda: transfer.gather_slices([t], host),
        "gather_to_device": lambda: transfer.gather_to_device(0, lib.poisoned(ordinal, 4096)),
        "copy_buffer": lambda: transfer.copy_buffer(0, 0, host),
        "copy_device_buffer": lambda: transfer.copy_device_buffer(0, 0),
        "broadcast": lambda: transfer.broadcast(host),
        "broadcast_from_device": lambda: transfer.broadcast_from_device(0),
    }
    for name, call in calls.items():
        with pytest.raises(gpuxfer.InvalidArgumentError, match="the transfer is closed") as caught:
            call()
        assert type(caught.value) is gpuxfer.InvalidArgumentError, name
    assert (host == POISON).all(), "a call after close wrote the host array"
    transfer.close()  # a second close does nothing
    assert transfer.closed


def test_close_is_refused_while_a_handle_is_not_collected(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    transfer.set_device_buffer(0, lib.upload(manager.devices[0].ordinal, pattern(0, 1 << 20)))
    handle = transfer.gather(0)
    with pytest.raises(gpuxfer.InvalidArgumentError, match="1 operation\\(s\\) in flight"):
        transfer.close()
    assert not transfer.closed
    handle.get()
    transfer.close()
    assert transfer.closed


def test_an_error_in_a_with_block_is_not_replaced_by_the_refused_close(manager, lib):
    with pytest.raises(ZeroDivisionError):
        with gpuxfer.Transfer(manager) as transfer:
            transfer.set_device_buffer(0, lib.upload(manager.devices[0].ordinal, pattern(0, 4096)))
            handle = transfer.gather(0)  # alive past the block: close is refused
            raise ZeroDivisionError
    assert not transfer.closed
    handle.get()
    transfer.close()
    assert transfer.closed


def test_a_dropped_handle_keeps_the_registered_tensors_until_its_copy_is_done(manager2, lib):
    """copy_device_buffer_async(0, 1) behind a slow producer, its handle dropped unread, device 1's
    registration cleared and its tensor dropped: the tensor lives until the copy is done (close waits)."""
    transfer = gpuxfer.Transfer(manager2)
    first, second = (d.ordinal for d in manager2.devices[:2])
    target = lib.poisoned(second, 1 << 20)
    stream, _, source = written_late(lib, first, 1 << 20, seed=51)
    transfer.set_device_buffer(0, source, stream)
    transfer.set_device_buffer(1, target, stream=0)
    alive = weakref.ref(target)
    handle = transfer.copy_device_buffer_async(0, 1)  # behind the ~50 ms spin on stream
    del handle, target
    transfer.clear_device_buffer(1)
    # Before any collection: freeing device memory waits for the GPU (cudaFree), the source's slow write
    # included where both devices are one GPU (simulated).
    assert alive() is not None, "the copy's destination died while the copy of a dropped handle ran"
    assert transfer._kept >= 1
    transfer.close()  # waits for the dropped handle's copy
    gc.collect()
    assert alive() is None, "kept past the copy"


def test_a_dropped_gather_handle_gives_its_pinned_blocks_back_to_the_pool_at_once(manager2, lib):
    """Its results go to the pool's pending list when the handle goes (the pool waits for those, near its
    limit, rather than failing), not into what the transfer keeps until its next call."""
    transfer = gpuxfer.Transfer(manager2)
    stream, _, source = written_late(lib, manager2.devices[1].ordinal, 1 << 20, seed=52)
    transfer.set_device_buffer(1, source, stream)
    handle = transfer.gather(0)  # device 1's buffer, behind the ~50 ms spin
    assert manager2.pinned_pool_stats()["in_use"] >= 1 << 20
    del handle
    assert manager2.pinned_pool_stats()["in_use"] == 0, "a dropped handle's blocks still count as in use"
    transfer.close()


def test_close_waits_for_the_stream_ordered_calls_then_lets_go_of_what_they_kept(manager, lib):
    """close() without a synchronize: the copy queued behind a slow producer lands before close returns,
    and the registered tensor it kept is let go after."""
    ordinal = manager.devices[0].ordinal
    transfer = gpuxfer.Transfer(manager)
    data = pattern(0, 1 << 20, 42)
    # Registered, so that the call returns once queued (from pageable memory it waits for the staging,
    # and so for the producer); and first, as registering may synchronise the device.
    with gpuxfer.register_host(data):
        stream, _, tensor = written_late(lib, ordinal, 1 << 20, seed=41)
        transfer.set_device_buffer(0, tensor, stream)
        alive = weakref.ref(tensor)
        transfer.copy_buffer(0, 0, data, stream=stream)  # behind the ~50 ms spin on stream
        assert transfer._kept >= 1, "nothing kept while the stream had not got to the copy"
        transfer.close()
        assert transfer._kept == 0, "kept past close"
        got = lib.download(tensor)  # no wait for stream: close did
    np.testing.assert_array_equal(got, data)
    del tensor
    gc.collect()
    assert alive() is None, "close kept the tensor registered behind the stream"


# --- another thread's stream-ordered call across a clear ----------------------------------------------

# torch.cuda._sleep spins this many clock cycles: at the H200's 1.98 GHz boost (no SM clock is above
# 2 GHz) at least 0.6 s and 2.5 s; a lower clock makes both longer, in the same ratio.
_FIRST_SPIN_CYCLES = 1_200_000_000
_SECOND_SPIN_CYCLES = 5_000_000_000


def test_a_tensor_cleared_during_another_threads_stream_ordered_call_is_kept_for_it(manager):
    """Thread B's broadcast(stream=s2) waits in C++, GIL released, for the oldest of two staging rings
    still pending (the README's bound: at most two rings of one size per first target device, a third
    upload waits for the oldest), while the main thread clears the registration: the tensor is retired
    then, and the broadcast queued behind s2's spin still writes it. It must be kept until s2 gets past
    the broadcast, not dropped when B's call ends (the retired list empties as the last call in flight
    ends, which came before the keep)."""
    torch = pytest.importorskip("torch")
    import threading

    ordinal = manager.devices[0].ordinal
    # One device: the per-device upload, through one ring whose owner is that device.
    transfer = gpuxfer.Transfer(gpuxfer.Manager(devices=[ordinal]))
    nbytes = 1 << 20  # one chunk, which fits every ring: each upload returns once staged
    registered = torch.full((nbytes,), POISON, dtype=torch.uint8, device=f"cuda:{ordinal}")
    torch.cuda.synchronize(ordinal)
    # The legacy default stream: the side streams below do not wait for it, nor it for them until the
    # operations' ends are joined to it (torch's streams are non-blocking).
    transfer.set_device_buffer(0, registered, stream=0)
    alive = weakref.ref(registered)
    del registered
    s1 = torch.cuda.Stream(device=f"cuda:{ordinal}")
    s2 = torch.cuda.Stream(device=f"cuda:{ordinal}")
    first, last = pattern(0, nbytes, 61), pattern(0, nbytes, 62)
    for _ in range(3):  # rings of this size in the pool, idle: no pinned allocation (which may synchronise)
        transfer.broadcast(first, stream=s1)
    torch.cuda.synchronize(ordinal)

    with torch.cuda.stream(s1):
        torch.cuda._sleep(_FIRST_SPIN_CYCLES)
    with torch.cuda.stream(s2):
        torch.cuda._sleep(_SECOND_SPIN_CYCLES)
    transfer.broadcast(first, stream=s1)  # two rings pending behind s1's spin
    transfer.broadcast(first, stream=s1)
    assert not s1.query(), "s1 got past its spin before the rings were pending: no wait to rely on"

    started, failures = threading.Event(), []

    def third():
        started.set()
        try:
            transfer.broadcast(last, stream=s2)  # waits for the first ring, i.e. for s1's spin
        except BaseException as error:  # re-raised below
            failures.append(error)

    b = threading.Thread(target=third)
    b.start()
    started.wait()
    time.sleep(0.3)  # B is in the C++ call now, waiting for the ring with the GIL released
    assert b.is_alive() and not s1.query(), "the third broadcast did not wait for the oldest ring"
    transfer.clear_device_buffer(0)  # the tensor is retired: B's call is in flight
    b.join()
    assert not failures, failures
    s1.synchronize()
    assert transfer._kept >= 1  # reaps the first two broadcasts' keeps: only B's may hold the tensor now
    gc.collect()
    assert not s2.query(), "s2 got past its spin before the check: nothing was left to keep"
    assert alive() is not None, "a tensor cleared during a stream-ordered call died before its stream passed"
    s2.synchronize()
    tensor = alive()
    assert tensor is not None
    np.testing.assert_array_equal(tensor.cpu().numpy(), last)  # the legacy stream waited for the broadcast
    del tensor
    assert transfer._kept == 0
    gc.collect()
    assert alive() is None, "kept past the stream"


# --- the buffer export of resizable host arrays ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["bytearray", "array.array"])
def test_a_registered_resizable_array_cannot_move_its_bytes(manager, kind):
    """register_host holds the buffer export, not only the object: a bytearray or array.array refuses to
    resize (and so to reallocate under the page-locked range) until the registration is closed."""
    import array

    host = bytearray(1 << 20) if kind == "bytearray" else array.array("B", bytes(1 << 20))
    with gpuxfer.register_host(host) as registration:
        assert registration.active
        with pytest.raises(BufferError):
            host.extend(b"\x01" * 4096)
        assert len(host) == 1 << 20
    host.extend(b"\x01")  # closed: the export is gone
    assert len(host) == (1 << 20) + 1


@pytest.mark.parametrize("op", ["broadcast", "gather_into"])
def test_a_stream_ordered_call_keeps_its_host_arrays_export(manager, lib, op):
    """What a stream-ordered call keeps of a bytearray (until its stream gets past the call and a later
    call reaps) includes its buffer export: the bytearray cannot be resized under a DMA still queued."""
    nbytes = 1 << 20
    transfer = gpuxfer.Transfer(manager)
    s = lib.stream(manager.devices[0].ordinal)
    sent = pattern(0, nbytes, 73)
    if op == "broadcast":  # every device's buffer is written
        tensors = [lib.poisoned(info.ordinal, nbytes) for info in manager.devices]
        host = bytearray(sent.tobytes())
    else:  # device 0's buffer alone, gathered into the bytearray
        tensors = [lib.upload(manager.devices[0].ordinal, sent)]
        host = bytearray([POISON]) * nbytes
    lib.synchronize()
    for i, t in enumerate(tensors):
        transfer.set_device_buffer(i, t, stream=0)
    if op == "broadcast":
        transfer.broadcast(host, stream=s)
    else:
        transfer.gather_into(host, stream=s)
    # Nothing reaps before the next call: the keep holds whether or not the stream got past it already.
    with pytest.raises(BufferError):
        host.extend(b"\x01")
    lib.synchronize()
    assert transfer._kept == 0
    host.extend(b"\x01")  # let go of: resizable again
    if op == "broadcast":
        for i, t in enumerate(tensors):
            np.testing.assert_array_equal(lib.download(t), sent, err_msg=f"device {i}")
    else:
        np.testing.assert_array_equal(np.frombuffer(bytes(host[:nbytes]), np.uint8), sent)


# --- teardown without the GIL ------------------------------------------------------------------------------


def test_a_managers_teardown_lets_other_threads_run_while_it_waits_for_the_gpu():
    """The last reference to a Manager ends it, and its pinned pool frees its cached blocks: cudaFreeHost
    waits for the work queued on every stream of the device (a spin of at least 0.6 s here). Another Python
    thread must run meanwhile: the teardown lets the GIL go, as every blocking call does."""
    import threading

    from conftest import needs_devices

    needs_devices(1)
    torch = pytest.importorskip("torch")
    manager = gpuxfer.Manager()
    ordinal = manager.devices[0].ordinal
    transfer = gpuxfer.Transfer(manager)
    tensor = torch.ones(1 << 20, dtype=torch.uint8, device=f"cuda:{ordinal}")
    transfer.set_device_buffer(0, tensor)
    del transfer.gather_all()[0]  # a pinned block, cached in the pool once the array is gone
    transfer.close()
    del transfer
    gc.collect()
    assert manager.pinned_pool_stats()["cached"] > 0
    ticks, stop = [0], threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    with torch.cuda.device(ordinal):
        spin = torch.cuda.Stream()
        with torch.cuda.stream(spin):
            torch.cuda._sleep(_FIRST_SPIN_CYCLES)
    time.sleep(0.05)
    before, start = ticks[0], time.monotonic()
    del manager
    gc.collect()
    took, during = time.monotonic() - start, ticks[0] - before
    stop.set()
    ticker.join()
    torch.cuda.synchronize(ordinal)
    assert took > 0.2, f"the teardown took {took * 1000:.0f} ms: it did not wait for the spin (no test)"
    assert during >= 20, f"{during} ticks of another thread in the {took * 1000:.0f} ms of the teardown: it held the GIL"
