"""Gathers with torch and with cupy tensors, byte for byte: gather_blocking, gather, gather_async,
gather_all, gather_into (numpy, CPU tensor, registered memory), gather_to_device, gather_slices."""

from __future__ import annotations

import asyncio
import gc

import gpuxfer
import numpy as np
import pytest
from conftest import needs_devices
from frameworks import POISON, pattern, written_late

SIZES = [4096, (3 << 20) + 17]


def register_all(transfer, lib, nbytes, seed=1):
    """A pattern tensor on every device, registered; returns the tensors (the caller may drop them)."""
    tensors = []
    for i, info in enumerate(transfer.manager.devices):
        t = lib.upload(info.ordinal, pattern(i, nbytes + 13 * i, seed))
        transfer.set_device_buffer(i, t)
        tensors.append(t)
    return tensors


def expect(array, device, nbytes, seed=1):
    assert array is not None, f"device {device}: nothing gathered"
    np.testing.assert_array_equal(
        array, pattern(device, nbytes + 13 * device, seed), err_msg=f"device {device}"
    )


@pytest.mark.parametrize("nbytes", SIZES)
def test_gather_all_brings_every_device_back(manager, lib, nbytes):
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, nbytes)
    arrays = transfer.gather_all()
    assert len(arrays) == manager.device_count
    for i, a in enumerate(arrays):
        assert a.dtype == np.uint8 and a.ndim == 1
        expect(a, i, nbytes)


@pytest.mark.parametrize("nbytes", SIZES)
def test_gather_blocking_skips_the_destination(manager2, lib, nbytes):
    transfer = gpuxfer.Transfer(manager2)
    register_all(transfer, lib, nbytes)
    for dst in range(manager2.device_count):
        arrays = transfer.gather_blocking(dst)
        sources = [d for d in range(manager2.device_count) if d != dst]
        assert len(arrays) == len(sources)
        for device, a in zip(sources, arrays):
            expect(a, device, nbytes)


def test_gather_handle_and_await(manager2, lib):
    """gather(dst).get() and await gather_async(dst) to every destination: one array per other device,
    ascending. Each array is poisoned once checked, so that the next gather, leasing its block again, must
    write it."""
    transfer = gpuxfer.Transfer(manager2)
    register_all(transfer, lib, 1 << 20, seed=7)
    for dst in range(manager2.device_count):
        sources = [d for d in range(manager2.device_count) if d != dst]
        for form in ("handle", "await"):
            got = transfer.gather(dst).get() if form == "handle" else asyncio.run(transfer.gather_async(dst))
            assert len(got) == len(sources), f"{form}, to {dst}: {len(got)} arrays for {len(sources)} sources"
            for device, a in zip(sources, got):
                expect(a, device, 1 << 20, seed=7)
                a[:] = POISON
            got = a = None


def test_a_gather_to_the_only_device_gives_no_array(manager, lib):
    """gather(dst) reads every device but dst: on a manager of one device, its buffer registered (gather_all
    brings it back), the handle and the await both give an empty list."""
    transfer = gpuxfer.Transfer(gpuxfer.Manager(devices=[manager.devices[0].ordinal]))
    register_all(transfer, lib, 1 << 20, seed=7)
    assert transfer.gather(0).get() == [], "the destination's own buffer was gathered"
    assert asyncio.run(transfer.gather_async(0)) == [], "the destination's own buffer was awaited"
    arrays = transfer.gather_all()
    assert len(arrays) == 1
    expect(arrays[0], 0, 1 << 20, seed=7)


def test_an_unregistered_device_gives_none(manager):
    transfer = gpuxfer.Transfer(manager)
    assert transfer.gather_all() == [None] * manager.device_count


def concatenation(manager, nbytes, seed=1, skip=None):
    return np.concatenate(
        [pattern(i, nbytes + 13 * i, seed) for i in range(manager.device_count) if i != skip]
    )


def check_pieces(pieces, manager, nbytes, skip=None):
    offset = 0
    devices = [i for i in range(manager.device_count) if i != skip]
    assert [p.device for p in pieces] == devices
    for p in pieces:
        assert (p.offset, p.size) == (offset, nbytes + 13 * p.device)
        offset += p.size


@pytest.mark.parametrize("nbytes", SIZES)
def test_gather_into_numpy_pageable_and_registered(manager, lib, nbytes):
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, nbytes)
    expected = concatenation(manager, nbytes)
    out = np.full(expected.size + 64, POISON, np.uint8)
    check_pieces(transfer.gather_into(out), manager, nbytes)
    np.testing.assert_array_equal(out[: expected.size], expected)
    assert (out[expected.size :] == POISON).all(), "gather_into wrote past the pieces"

    out[:] = POISON
    with gpuxfer.register_host(out) as registration:
        assert registration.active and registration.size == out.nbytes
        transfer.gather_into(out)
    assert not registration.active
    np.testing.assert_array_equal(out[: expected.size], expected)


def test_gather_into_skips_a_device(manager2, lib):
    transfer = gpuxfer.Transfer(manager2)
    register_all(transfer, lib, 1 << 16)
    expected = concatenation(manager2, 1 << 16, skip=0)
    out = np.full(expected.size, POISON, np.uint8)
    check_pieces(transfer.gather_into(out, skip_device=0), manager2, 1 << 16, skip=0)
    np.testing.assert_array_equal(out, expected)


def test_gather_into_a_cpu_tensor_pinned_or_not(manager):
    torch = pytest.importorskip("torch")
    from frameworks import Torch

    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, Torch(), 1 << 20)
    expected = concatenation(manager, 1 << 20)
    for pin in (False, True):
        out = torch.full((expected.size,), POISON, dtype=torch.uint8)
        if pin:
            out = out.pin_memory()
        transfer.gather_into(out)
        np.testing.assert_array_equal(out.numpy(), expected, err_msg=f"pinned={pin}")


def test_gather_into_too_small_an_array_is_refused(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, 4096)
    with pytest.raises(gpuxfer.InvalidArgumentError):
        transfer.gather_into(np.zeros(100, np.uint8))


def test_gather_to_device_into_a_caller_tensor(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, 1 << 18)
    expected = concatenation(manager, 1 << 18)
    for dst, info in enumerate(manager.devices):
        out = lib.poisoned(info.ordinal, expected.size + 32)
        check_pieces(transfer.gather_to_device(dst, out), manager, 1 << 18)
        got = lib.download(out)
        np.testing.assert_array_equal(got[: expected.size], expected, err_msg=f"into device {dst}")
        assert (got[expected.size :] == POISON).all()


def test_gather_slices_packs_pieces_in_order(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    sources = [lib.upload(info.ordinal, pattern(i, 1 << 16, 3)) for i, info in enumerate(manager.devices)]
    lib.synchronize()  # gather_slices orders nothing: the producers must be done
    slices, expected = [], []
    for k in range(64):
        device = k % manager.device_count
        start = (k * 1031) % ((1 << 16) - 4096)
        slices.append((device, sources[device][start : start + 4096 - k]))
        expected.append(pattern(device, 1 << 16, 3)[start : start + 4096 - k])
    expected = np.concatenate(expected)
    out = np.full(expected.size + 8, POISON, np.uint8)
    assert transfer.gather_slices(slices, out) == expected.size
    np.testing.assert_array_equal(out[: expected.size], expected)
    assert (out[expected.size :] == POISON).all()
    out[:] = POISON  # bare tensors: the device from their DLPack device id
    assert transfer.gather_slices([tensor for _, tensor in slices], out) == expected.size
    np.testing.assert_array_equal(out[: expected.size], expected)


def test_without_stream_gather_slices_reads_after_the_current_streams_write(manager, lib):
    """The slices are read after the current stream's write, waited for on the host. cupy's __dlpack__
    (called with no stream) makes the legacy default stream wait for cupy's current stream, so with cupy
    this passes on the old code too; with torch, whose __dlpack__ need not, it tells the two apart."""
    transfer = gpuxfer.Transfer(manager)
    stream, data, late = written_late(lib, manager.devices[0].ordinal, 1 << 16, 18)
    out = np.full(1 << 16, POISON, np.uint8)
    with lib.current(stream):
        assert transfer.gather_slices([(0, late[: 1 << 15]), late[1 << 15 :]], out) == 1 << 16
    np.testing.assert_array_equal(out, data)


def test_without_stream_gather_to_device_writes_after_the_current_streams_read(manager, lib):
    """out is written after the current stream's read of it, waited for on the host. cupy's __dlpack__
    (called with no stream) makes the legacy default stream wait for cupy's current stream, so with cupy
    this passes on the old code too; with torch, whose __dlpack__ need not, it tells the two apart."""
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, 1 << 18)
    expected = concatenation(manager, 1 << 18)
    ordinal = manager.devices[0].ordinal
    stream = lib.stream(ordinal)
    out = lib.poisoned(ordinal, expected.size)
    before = lib.poisoned(ordinal, expected.size)
    lib.synchronize()
    with lib.current(stream):
        lib.slow_copy_on(stream, before, out)  # reads out behind a ~50 ms spin: it must see the poison
        transfer.gather_to_device(0, out)
    lib.synchronize()
    assert (lib.download(before) == POISON).all(), "gather_to_device wrote out before the stream read it"
    np.testing.assert_array_equal(lib.download(out), expected)


class InterfaceOnly:
    """A device tensor seen through __cuda_array_interface__ v3 alone, naming the stream it is written on
    (as numba's arrays do): no framework whose current stream gpuxfer could ask."""

    def __init__(self, lib, tensor, nbytes, stream):
        self.tensor = tensor  # kept alive with the view
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (lib.pointer(tensor), False),
            "version": 3,
            "stream": gpuxfer.stream_handle(stream),
        }


@pytest.mark.parametrize("form", ["blocking", "stream"])
def test_gather_slices_reads_after_the_stream_the_interface_names(manager, lib, form):
    """Without stream= the slice's interface stream is waited for on the host; with stream= (another
    stream) that stream waits for it on the GPU. Either way the copy behind the spin is what is read."""
    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    producer, data, late = written_late(lib, ordinal, 1 << 16, 19)  # a ~50 ms spin, then the write
    out = np.full(1 << 16, POISON, np.uint8)  # pageable: the stream form returns with the bytes
    view = InterfaceOnly(lib, late, 1 << 16, producer)
    if form == "blocking":
        assert transfer.gather_slices([(0, view)], out) == 1 << 16
    else:
        assert transfer.gather_slices([(0, view)], out, stream=lib.stream(ordinal)) == 1 << 16
    np.testing.assert_array_equal(out, data)


def test_two_threads_gather_at_once(manager, lib):
    import threading

    needs_devices(1)
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, 1 << 20, seed=5)
    errors = []

    def work():
        try:
            for _ in range(20):
                arrays = transfer.gather_all()
                for i, a in enumerate(arrays):
                    expect(a, i, 1 << 20, seed=5)
                    # Its block goes back to the pool for the next gathers (both threads'): poisoned, it
                    # fails whichever of them leases it and writes nothing into it.
                    a[:] = POISON
                arrays = a = None  # every block of this round back to the pool
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    # 40 gathers of one size class: at most a few blocks each can be leased at once, the rest are reused.
    reuses = manager.pinned_pool_stats()["reuses"]
    assert reuses > 0, "no gather reused a poisoned block: the poison proved nothing"


def test_time_gather_all_times_the_cpp_call_and_gives_every_block_back(manager, lib):
    """The bench's in-process C++ timing (Transfer._time_gather_all): one positive time per call, and the
    results of those calls are back in the pool when it returns."""
    transfer = gpuxfer.Transfer(manager)
    register_all(transfer, lib, 4096)
    seconds = transfer._time_gather_all(25)
    assert len(seconds) == 25
    assert all(0 < s < 10 for s in seconds), seconds
    assert manager.pinned_pool_stats()["in_use"] == 0
    assert transfer._time_gather_all(0) == []


def test_two_threads_take_one_handles_results_at_once(manager, lib):
    """Both threads wait in get() (the GIL released) for a producer spinning on the GPU, and wake together:
    one takes every result, the other an empty list; no block is handed out twice or given back twice."""
    import threading

    nbytes = 1 << 20
    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    for round_ in range(30):
        stream, data, tensor = written_late(lib, ordinal, nbytes, seed=60 + round_)
        transfer.set_device_buffer(0, tensor, stream=stream)
        handle = transfer.gather_all(stream=stream)
        taken = [None, None]
        errors = []
        start = threading.Barrier(2)

        def take(i):
            try:
                start.wait()
                taken[i] = handle.get()
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        full = [t for t in taken if t]
        assert len(full) == 1, f"round {round_}: {[len(t) if t is not None else None for t in taken]}"
        assert [len(t) for t in taken if not t] == [0]
        assert np.array_equal(np.asarray(full[0][0]), data), f"round {round_}"
        full = taken = handle = None  # the blocks go back before the next round
        lib.synchronize()
    transfer.clear_device_buffer(0)
    gc.collect()
    assert manager.pinned_pool_stats()["in_use"] == 0
