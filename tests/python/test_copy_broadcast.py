"""copy_buffer, copy_device_buffer (every path), broadcast (bytes, numpy, CPU tensor, every path) and
broadcast_from_device, with torch and with cupy tensors, byte for byte, outputs poisoned first."""

from __future__ import annotations

import gpuxfer
import numpy as np
import pytest
from frameworks import POISON, pattern


def poisoned_everywhere(transfer, lib, nbytes):
    tensors = [lib.poisoned(info.ordinal, nbytes) for info in transfer.manager.devices]
    for i, t in enumerate(tensors):
        transfer.set_device_buffer(i, t)
    return tensors


def expect_prefix(lib, tensor, data, nbytes, what):
    got = lib.download(tensor)
    np.testing.assert_array_equal(got[: data.size], data, err_msg=what)
    assert (got[data.size : nbytes] == POISON).all(), f"{what}: bytes past the data were written"


@pytest.mark.parametrize("kind", ["bytes", "numpy", "torch"])
@pytest.mark.parametrize("path", list(gpuxfer.HostBroadcastPath.__members__.values()))
def test_broadcast_reaches_every_device(manager, lib, kind, path):
    # As the C++ tests: on one device scatter_allgather scatters every chunk to it (nothing to forward).
    if path == gpuxfer.HostBroadcastPath.scatter_allgather and (
        manager.device_count > 1 and not manager.all_peers_enabled
    ):
        pytest.skip("scatter_allgather needs peer access between every pair of devices")
    nbytes = (5 << 20) + 3
    data = pattern(9, nbytes - 1001, 2)
    if kind == "torch":
        source = pytest.importorskip("torch").from_numpy(data.copy())
    else:
        source = data.tobytes() if kind == "bytes" else data
    transfer = gpuxfer.Transfer(manager)
    tensors = poisoned_everywhere(transfer, lib, nbytes)
    transfer.broadcast(source, path)
    for i, t in enumerate(tensors):
        expect_prefix(lib, t, data, nbytes, f"device {i}, {kind}, {path}")


def test_broadcast_larger_than_a_buffer_is_refused(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    poisoned_everywhere(transfer, lib, 1024)
    with pytest.raises(gpuxfer.InvalidArgumentError):
        transfer.broadcast(bytes(2048))


def test_copy_buffer_writes_one_device(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    tensors = poisoned_everywhere(transfer, lib, 1 << 20)
    dst = manager.device_count - 1
    data = pattern(dst, (1 << 20) - 77, 4)
    transfer.copy_buffer(0, dst, memoryview(data))
    expect_prefix(lib, tensors[dst], data, 1 << 20, f"device {dst}")
    for i, t in enumerate(tensors):
        if i != dst:
            assert (lib.download(t) == POISON).all(), f"copy_buffer touched device {i}"


@pytest.mark.parametrize("path", list(gpuxfer.CopyPath.__members__.values()))
def test_copy_device_buffer_both_ways(manager2, lib, path):
    nbytes = (9 << 20) + 5
    for src, dst in ((0, 1), (1, 0)):
        if path == gpuxfer.CopyPath.peer and not manager2.peer_enabled(src, dst):
            pytest.skip(f"no peer access {src} -> {dst}")
        transfer = gpuxfer.Transfer(manager2)
        data = pattern(src, nbytes - 4096, 6)
        source = lib.upload(manager2.devices[src].ordinal, data)
        target = lib.poisoned(manager2.devices[dst].ordinal, nbytes)
        transfer.set_device_buffer(src, source)
        transfer.set_device_buffer(dst, target)
        transfer.copy_device_buffer(src, dst, path)
        expect_prefix(lib, target, data, nbytes, f"{src} -> {dst}, {path}")
        target2 = lib.poisoned(manager2.devices[dst].ordinal, nbytes)
        transfer.set_device_buffer(dst, target2)
        transfer.copy_device_buffer_async(src, dst, path).wait()
        expect_prefix(lib, target2, data, nbytes, f"{src} -> {dst}, {path}, async")


def test_copy_to_itself_is_refused(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    poisoned_everywhere(transfer, lib, 4096)
    with pytest.raises(gpuxfer.InvalidArgumentError):
        transfer.copy_device_buffer(0, 0)


@pytest.mark.parametrize("path", list(gpuxfer.DeviceBroadcastPath.__members__.values()))
def test_broadcast_from_device_every_root(manager2, lib, path):
    if path == gpuxfer.DeviceBroadcastPath.nccl and not manager2.nccl_available:
        pytest.skip("NCCL is not available")
    nbytes = (4 << 20) + 11
    for root in range(manager2.device_count):
        transfer = gpuxfer.Transfer(manager2)
        data = pattern(root, nbytes - 513, 8)
        tensors = []
        for i, info in enumerate(manager2.devices):
            t = lib.upload(info.ordinal, data) if i == root else lib.poisoned(info.ordinal, nbytes)
            transfer.set_device_buffer(i, t)
            tensors.append(t)
        transfer.broadcast_from_device(root, path)
        for i, t in enumerate(tensors):
            if i != root:
                expect_prefix(lib, t, data, nbytes, f"root {root} -> {i}, {path}")
