"""gpuxfer.copy_blocks from torch and cupy: both directions, pairs on the host and on the GPU, the KV-cache
layout (layers first), the stream-ordered form, and bad pairs refused with nothing written."""

from __future__ import annotations

import gpuxfer
import numpy as np
import pytest

from conftest import needs_devices


@pytest.fixture
def torch():
    needs_devices(1)
    return pytest.importorskip("torch")


def _random_pairs(torch, n, blocks, seed):
    g = torch.Generator().manual_seed(seed)
    src = torch.randperm(blocks, generator=g)[:n]
    dst = torch.randperm(blocks, generator=g)[:n]
    return torch.stack([src, dst], dim=1).contiguous()


@pytest.mark.parametrize("path", ["automatic", "copy_engine", "batch", "kernel"])
@pytest.mark.parametrize("pairs_on", ["cpu", "cuda"])
def test_offload_and_load_back(torch, path, pairs_on):
    blocks, n = 64, 40
    gpu = torch.randint(0, 255, (blocks, 16, 257), dtype=torch.uint8, device="cuda")
    host = torch.zeros((blocks, 16, 257), dtype=torch.uint8).pin_memory()
    pairs = _random_pairs(torch, n, blocks, 1)
    if pairs_on == "cuda":
        if path in ("copy_engine", "batch"):
            with pytest.raises(gpuxfer.UnsupportedError):
                gpuxfer.copy_blocks(gpu, host, pairs.cuda(), path=path)
            return
        pairs = pairs.cuda()
    taken = gpuxfer.copy_blocks(gpu, host, pairs, path=path)
    assert path == "automatic" or taken == path
    p = pairs.cpu()
    assert torch.equal(host[p[:, 1]], gpu[p[:, 0]].cpu())
    untouched = torch.ones(blocks, dtype=torch.bool)
    untouched[p[:, 1]] = False
    assert int(host[untouched].count_nonzero()) == 0
    back = torch.zeros_like(gpu)
    swapped = torch.stack([p[:, 1], p[:, 0]], dim=1).contiguous()
    gpuxfer.copy_blocks(host, back, swapped.to(pairs.device), path=path)
    assert torch.equal(back[p[:, 0]], gpu[p[:, 0]])


def test_kv_cache_layout_layers_first_on_a_stream(torch):
    # [2 (K and V), num_blocks, block_size, heads, head_dim], as vLLM keeps one layer's cache.
    gpu = torch.randn((2, 32, 16, 4, 64), dtype=torch.float16, device="cuda")
    host = torch.zeros((2, 64, 16, 4, 64), dtype=torch.float16).pin_memory()
    pairs = torch.tensor([[3, 10], [4, 11], [5, 12], [31, 0]], dtype=torch.int64)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        gpuxfer.copy_blocks(gpu, host, pairs, stream=stream, layers_first=True)
    stream.synchronize()
    assert torch.equal(host[:, pairs[:, 1]], gpu[:, pairs[:, 0]].cpu())


def test_bad_pairs_write_nothing(torch):
    gpu = torch.arange(8 * 512, dtype=torch.int32, device="cuda").reshape(8, 512)
    host = torch.zeros((8, 512), dtype=torch.int32).pin_memory()
    with pytest.raises(gpuxfer.InvalidArgumentError, match="out of range"):
        gpuxfer.copy_blocks(gpu, host, [[0, 0], [1, 8]])
    with pytest.raises(gpuxfer.InvalidArgumentError, match="earlier pair"):
        gpuxfer.copy_blocks(gpu, host, [[0, 2], [1, 2]])
    assert int(host.count_nonzero()) == 0
    with pytest.raises(gpuxfer.InvalidArgumentError, match="pin_memory"):
        gpuxfer.copy_blocks(gpu, torch.zeros((8, 512), dtype=torch.int32), [[0, 0]])


def test_device_pairs_out_of_range_are_reported(torch):
    gpu = torch.arange(8 * 512, dtype=torch.int32, device="cuda").reshape(8, 512)
    host = torch.zeros((8, 512), dtype=torch.int32).pin_memory()
    pairs = torch.tensor([[1, 0], [99, 1]], dtype=torch.int64, device="cuda")
    with pytest.raises(gpuxfer.InvalidArgumentError, match="skipped"):
        gpuxfer.copy_blocks(gpu, host, pairs)
    assert torch.equal(host[0], gpu[1].cpu())
    assert int(host[1].count_nonzero()) == 0
    flag = torch.zeros(1, dtype=torch.int32, device="cuda")
    gpuxfer.copy_blocks(gpu, host, pairs, stream=torch.cuda.current_stream(), error_flag=flag)
    assert int(flag.item()) == 1


def test_cupy_regions(torch):
    cp = pytest.importorskip("cupy")
    import cupyx

    gpu = cp.arange(16 * 1024, dtype=cp.uint8).reshape(16, 1024)
    host = cupyx.empty_pinned((16, 1024), dtype=np.uint8)
    host[:] = 0
    pairs = cp.asarray([[2, 5], [7, 6]], dtype=cp.int64)
    gpuxfer.copy_blocks(gpu, host, pairs)
    assert (host[5] == cp.asnumpy(gpu[2])).all() and (host[6] == cp.asnumpy(gpu[7])).all()
