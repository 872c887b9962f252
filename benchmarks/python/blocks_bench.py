"""copy_blocks from Python against what serving engines write today, in one run, every sample checked:
a torch indexing copy (``host[dst] = dev[src].cpu()`` to offload, ``dev[dst] = host[src].cuda()`` to load),
one cudaMemcpyAsync per block (``host[d].copy_(dev[s], non_blocking=True)``) and gpuxfer.copy_blocks.

    python benchmarks/python/blocks_bench.py [--sizes 4K,64K,1M] [--iters 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gpuxfer
import torch


poison = 0xA5  # what a destination holds before each sample


def _parse(text: str) -> int:
    return gpuxfer.parse_size(text)


def _time(fn, check, iters: int) -> float:
    times = []
    for _ in range(iters + 1):  # the first is a warm-up, checked all the same
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        check()
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4K,64K,1M")
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    print(f"{'dir':4} {'block':>6} {'blocks':>6} {'method':>14} {'GB/s':>8} {'vs torch':>8}")
    for size in (_parse(s) for s in args.sizes.split(",")):
        count = max(1024, min(16384, (64 << 20) // size))
        dev = torch.empty((count, size), dtype=torch.uint8, device="cuda")
        host = torch.empty((count, size), dtype=torch.uint8).pin_memory()
        g = torch.Generator().manual_seed(size)
        src, dst = torch.randperm(count, generator=g), torch.randperm(count, generator=g)
        pairs = torch.stack([src, dst], dim=1).contiguous()
        for direction in ("d2h", "h2d"):
            a, b = (dev, host) if direction == "d2h" else (host, dev)
            # A pattern of this size and direction in the source, the destination poisoned before every
            # sample: a block left unwritten, or written from the wrong place, fails the check.
            a.copy_(torch.randint(0, 256, (count, size), dtype=torch.uint8, generator=g))
            expect = a[src].cpu()
            b.fill_(poison)

            def check(b=b, expect=expect, what=f"{direction} {size} B"):
                if not torch.equal(b[dst].cpu(), expect):
                    raise SystemExit(f"blocks_bench: {what}: wrong bytes")
                b.fill_(poison)

            def torch_index(a=a, b=b):
                b[dst] = a[src].cpu() if not b.is_cuda else a[src].cuda(non_blocking=True)

            def per_block(a=a, b=b):
                for s, d in zip(src.tolist(), dst.tolist()):
                    b[d].copy_(a[s], non_blocking=True)

            def blocks(a=a, b=b):
                gpuxfer.copy_blocks(a, b, pairs, stream=torch.cuda.current_stream())

            base = None
            for name, fn in (("torch_index", torch_index), ("per_block", per_block), ("copy_blocks", blocks)):
                seconds = _time(fn, check, args.iters)
                gbs = count * size / seconds / 1e9
                base = base or gbs
                print(f"{direction:4} {size >> 10:>5}K {count:>6} {name:>14} {gbs:8.2f} {gbs / base:7.1f}x")


if __name__ == "__main__":
    main()
