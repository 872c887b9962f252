#!/usr/bin/env python3
"""What PyTorch users do today, measured like gpuxfer-bench: the same sizes, warm-up, median of the
samples, every sample's data checked, and the same JSON shape (``results`` rows; ``compare_to`` names the
gpuxfer operation each one stands beside).

GB/s = bytes / time / 1e9. bytes: gathers = size per device x devices (total bytes moved); broadcasts =
the payload size (bytes / time); copies = size. time: time.perf_counter around the call and a
synchronize of every device involved.

Exit codes: 0 when every byte was right, 1 otherwise, 2 without PyTorch or a CUDA device.
"""

import argparse
import datetime
import json
import re
import statistics
import sys
import time

SHORT_SIZES = [4 << 10, 1 << 20, 64 << 20, 256 << 20]
SHORT_ITERS = 5
HEADLINE_SIZE = 256 << 20
POISON = 0xA5
CONVENTION = (
    "GB/s = bytes / time / 1e9. bytes: gathers = size per device x devices (total bytes moved); "
    "broadcasts = the payload size (bytes / time); copies = size. time: time.perf_counter around the "
    "call and a synchronize of every device involved; median of the samples."
)


def parse_size(text):
    """'4K', '256M', '1GiB', '4096' -> bytes (powers of 1024), as gpuxfer::parse_size reads them."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def size_series(lo, hi, factor):
    if lo <= 0 or hi < lo or factor < 2:
        raise SystemExit(f"torch_baseline: need 0 < -b ({lo}) <= -e ({hi}) and -f >= 2 ({factor})")
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= factor
    return sizes


class Bench:
    """Devices, patterns and checks shared by the operations."""

    def __init__(self, torch, devices):
        self.torch = torch
        self.devices = devices
        self.run = 0
        self.pinned_outs = {}  # (size,) -> preallocated pinned outputs of torch_pinned_copy

    def pattern(self, seed, n, device):
        """n pattern bytes for seed on CUDA device `device` (the same bytes on every device)."""
        g = self.torch.Generator(device=f"cuda:{device}")
        g.manual_seed(seed)
        return self.torch.randint(0, 256, (n,), dtype=self.torch.uint8, device=f"cuda:{device}", generator=g)

    def seed(self, device):
        return self.run * 1000003 + device + 1

    def sync(self, devices=None):
        for d in self.devices if devices is None else devices:
            self.torch.cuda.synchronize(d)

    def wrong(self, got, seed, device, size):
        """Bytes of `got` (any device, or the CPU) that differ from the `size` pattern bytes of `seed`,
        compared on `device`; all of them when `got` has the wrong size."""
        if got.numel() != size:
            return size
        expected = self.pattern(seed, size, device)
        got = got.reshape(-1).to(f"cuda:{device}")
        return int((got != expected).sum().item())

    def sources(self, size):
        """One freshly patterned tensor per device, for this sample."""
        srcs = [self.pattern(self.seed(d), size, d) for d in self.devices]
        self.sync()
        return srcs

    def host_source(self, size, pinned):
        """A CPU tensor holding the pattern of seed(len(devices)), pinned or pageable."""
        seed = self.seed(len(self.devices))
        host = self.torch.empty(size, dtype=self.torch.uint8, pin_memory=pinned)
        host.copy_(self.pattern(seed, size, self.devices[0]))
        self.sync()
        return host, seed


def timed(bench, fn, devices=None):
    start = time.perf_counter()
    out = fn()
    bench.sync(devices)
    return time.perf_counter() - start, out


# --- the operations: each takes (bench, size) and returns (seconds, wrong bytes) -------------------


def op_gather(bench, size):
    comm = bench.torch.cuda.comm
    srcs = bench.sources(size)
    seconds, out = timed(bench, lambda: comm.gather(srcs, destination="cpu"))
    return seconds, sum(bench.wrong(out[k * size:(k + 1) * size], bench.seed(d), d, size)
                        for k, d in enumerate(bench.devices))


def op_cpu(bench, size):
    srcs = bench.sources(size)
    seconds, outs = timed(bench, lambda: [s.cpu() for s in srcs])
    return seconds, sum(bench.wrong(o, bench.seed(d), d, size) for o, d in zip(outs, bench.devices))


def op_pinned_copy(bench, size):
    if size not in bench.pinned_outs:
        bench.pinned_outs.clear()  # one size at a time: pinned memory is precious
        bench.pinned_outs[size] = [bench.torch.empty(size, dtype=bench.torch.uint8, pin_memory=True)
                                   for _ in bench.devices]
    outs = bench.pinned_outs[size]
    for o in outs:
        o.fill_(POISON)
    srcs = bench.sources(size)

    def copy():
        for o, s in zip(outs, srcs):
            o.copy_(s, non_blocking=True)

    seconds, _ = timed(bench, copy)
    return seconds, sum(bench.wrong(o, bench.seed(d), d, size) for o, d in zip(outs, bench.devices))


def op_gather_to_device(bench, size):
    comm = bench.torch.cuda.comm
    srcs = bench.sources(size)
    root = bench.devices[0]
    seconds, out = timed(bench, lambda: comm.gather(srcs, destination=root))
    return seconds, sum(bench.wrong(out[k * size:(k + 1) * size], bench.seed(d), root, size)
                        for k, d in enumerate(bench.devices))


def op_to_peer(bench, size):
    src = bench.sources(size)[0]
    a, b = bench.devices[0], bench.devices[1]
    seconds, out = timed(bench, lambda: src.to(f"cuda:{b}"), [a, b])
    return seconds, bench.wrong(out, bench.seed(a), b, size)


def bcast_from_host(bench, size, pinned):
    comm = bench.torch.cuda.comm
    host, seed = bench.host_source(size, pinned)
    seconds, outs = timed(bench, lambda: comm.broadcast(host, devices=bench.devices))
    return seconds, sum(bench.wrong(o, seed, d, size) for o, d in zip(outs, bench.devices))


def op_bcast_pinned(bench, size):
    return bcast_from_host(bench, size, True)


def op_bcast_pageable(bench, size):
    return bcast_from_host(bench, size, False)


def op_bcast_device(bench, size):
    comm = bench.torch.cuda.comm
    src = bench.sources(size)[0]
    seconds, outs = timed(bench, lambda: comm.broadcast(src, devices=bench.devices))
    root_seed = bench.seed(bench.devices[0])
    return seconds, sum(bench.wrong(o, root_seed, d, size) for o, d in zip(outs, bench.devices))


ALL_DEVICES = "size x devices (total bytes moved)"
PAYLOAD = "size (the payload: bytes / time)"
# name, function, compare_to (gpuxfer op), bytes rule, bytes(size, devices), devices needed, what
OPS = [
    ("torch_gather", op_gather, "gather", ALL_DEVICES, lambda s, n: s * n, 1,
     "torch.cuda.comm.gather(tensors, destination='cpu')"),
    ("torch_cpu", op_cpu, "gather_pageable", ALL_DEVICES, lambda s, n: s * n, 1,
     "[t.cpu() for t in tensors]"),
    ("torch_pinned_copy", op_pinned_copy, "gather", ALL_DEVICES, lambda s, n: s * n, 1,
     "preallocated pinned out[i].copy_(t[i], non_blocking=True) for every device, then synchronize"),
    ("torch_gather_to_device", op_gather_to_device, "gather_to_device", ALL_DEVICES, lambda s, n: s * n, 1,
     "torch.cuda.comm.gather(tensors, destination=0)"),
    ("torch_to_peer", op_to_peer, "copy_peer", "size", lambda s, n: s, 2, "t.to('cuda:1') from cuda:0"),
    ("torch_bcast_pinned", op_bcast_pinned, "bcast_pinned", PAYLOAD, lambda s, n: s, 1,
     "torch.cuda.comm.broadcast(pinned cpu tensor, devices)"),
    ("torch_bcast_pageable", op_bcast_pageable, "bcast_pageable", PAYLOAD, lambda s, n: s, 1,
     "torch.cuda.comm.broadcast(pageable cpu tensor, devices)"),
    ("torch_bcast_device", op_bcast_device, "bcast_device", PAYLOAD, lambda s, n: s, 2,
     "torch.cuda.comm.broadcast(cuda:0 tensor, devices)"),
]


def measure(bench, fn, size, warmup, iters):
    times, wrong = [], 0
    for i in range(warmup + iters):
        bench.run += 1
        seconds, bad = fn(bench, size)
        wrong += bad
        if i >= warmup:
            times.append(seconds)
    return statistics.median(times), min(times), max(times), wrong


def measure_sizes(bench, name, fn, compare_to, nbytes, args, kind, failed):
    """Every size of args for one operation: a table row printed and a result returned per size; a size
    that raises is reported in failed and the next one runs, as the C++ bench does."""
    print(f"# {'size':>12} {'bytes':>13} {'time(us)':>12} {'GB/s':>10} {'#wrong':>8}")
    rows = []
    for size in args.sizes:
        try:
            med, lo, hi, wrong = measure(bench, fn, size, args.warmup, args.iters)
        except Exception as e:  # noqa: BLE001 - report the failure and go on
            failed.append({"op": name, "what": f"{size}: {type(e).__name__}: {e}"})
            print(f"# {name} at {size}: FAILED: {type(e).__name__}: {e}")
            continue
        b = nbytes(size, len(bench.devices))
        gbps = b / med / 1e9
        print(f"  {size:12d} {b:13d} {med * 1e6:12.2f} {gbps:10.2f} {wrong:8d}{'  WRONG DATA' if wrong else ''}")
        rows.append({"op": name, "kind": kind, "compare_to": compare_to, "size": size, "bytes": b,
                     "time_us": med * 1e6, "min_us": lo * 1e6, "max_us": hi * 1e6, "gbps": gbps,
                     "ceiling": None, "ceiling_op": None, "ratio": None, "wrong": wrong, "samples": args.iters})
        sys.stdout.flush()
    return rows


def parse_args(argv, known=None, add_arguments=None, description=None):
    """The bench's command line; gpuxfer_python.py passes its own operations and arguments."""
    p = argparse.ArgumentParser(description=description or __doc__.split("\n\n")[0])
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("4K"), help="smallest size per device")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256M"), help="largest size per device")
    p.add_argument("-f", "--stepfactor", type=int, default=4, help="multiply the size by this between steps")
    p.add_argument("--iters", type=int, default=None, help="timed samples per size, at least 5 (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed samples before them")
    p.add_argument("--ops", default="", help="operations to run, comma-separated (default: all)")
    p.add_argument("--json", default="", help="write the results as JSON to this file")
    p.add_argument("--short", action="store_true", help="quick mode: sizes 4K,1M,64M,256M and 5 samples")
    if add_arguments:
        add_arguments(p)
    a = p.parse_args(argv)
    a.sizes = SHORT_SIZES if a.short else size_series(a.minbytes, a.maxbytes, a.stepfactor)
    if a.iters is None:
        a.iters = SHORT_ITERS if a.short else 10
    if a.iters < 5:
        p.error(f"--iters must be at least 5, got {a.iters}")
    known = known or [o[0] for o in OPS]
    a.ops = [o for o in a.ops.split(",") if o] or known
    for o in a.ops:
        if o not in known:
            p.error(f"unknown operation {o!r}; known: {','.join(known)}")
    return a


def runner_info(torch, devices):
    nccl = getattr(torch.cuda, "nccl", None)
    try:
        v = nccl.version() if nccl else None
        nccl_version = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001 - NCCL is optional here; record that it is missing
        nccl_version = "none"
    return {
        "devices": len(devices),
        "ordinals": devices,
        "names": [torch.cuda.get_device_name(d) for d in devices],
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "nccl_version": nccl_version,
    }


def run_ops(bench, ops, args, devices, tool):
    """Measures each (name, fn, compare_to, nbytes, need, header) of ops that args.ops names, at every size;
    one needing more devices than there are is waived. Returns (results, waived, failed, wrong bytes)."""
    results, waived, failed, wrong = [], [], [], 0
    for name, fn, compare_to, nbytes, need, header in ops:
        if name not in args.ops:
            continue
        if len(devices) < need:
            waived.append({"op": name, "why": f"needs {need} devices, {len(devices)} available"})
            print(f"#\n# {name}: waived: {waived[-1]['why']}")
            continue
        print(f"#\n# {name}: {header}")
        rows = measure_sizes(bench, name, fn, compare_to, nbytes, args, tool, failed)
        wrong += sum(r["wrong"] for r in rows)
        results += rows
    return results, waived, failed, wrong


def write_json(path, doc):
    """Writes a bench document as gpuxfer-bench does: indented, newline-terminated."""
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def main(argv):
    args = parse_args(argv)
    try:
        import torch
        import torch.cuda.comm  # noqa: F401 - makes torch.cuda.comm reachable
    except ImportError as e:
        print(f"torch_baseline: no PyTorch: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        print("torch_baseline: no CUDA device: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    devices = list(range(torch.cuda.device_count()))
    bench = Bench(torch, devices)
    info = runner_info(torch, devices)
    print(f"# torch_baseline, {info['date']}: torch {info['torch_version']}, CUDA {info['cuda_version']}, "
          f"NCCL {info['nccl_version']}, {len(devices)} devices: {', '.join(info['names'])}")
    print(f"# sizes per device: {args.sizes[0]} .. {args.sizes[-1]}; warm-up {args.warmup}, median of {args.iters}")
    print(f"# {CONVENTION}")
    ops = [(name, fn, compare_to, nbytes, need, f"{what}\n#   bytes = {rule}; compare with gpuxfer's {compare_to}")
           for name, fn, compare_to, rule, nbytes, need, what in OPS]
    results, waived, failed, total_wrong = run_ops(bench, ops, args, devices, "torch")
    head = HEADLINE_SIZE if HEADLINE_SIZE in args.sizes else args.sizes[-1]
    headline = {"size": head, "gbps": {r["op"]: r["gbps"] for r in results if r["size"] == head}}
    ok = total_wrong == 0 and not failed
    print(f"#\n# torch_baseline: {'OK' if ok else 'FAILED'}: {total_wrong} wrong bytes, {len(failed)} failed, "
          f"{len(waived)} waived")
    if args.json:
        doc = {"schema": "gpuxfer-bench/1", "tool": "torch_baseline", "convention": CONVENTION, "runner": info,
               "ceilings": {}, "results": results, "waived": waived, "failed": failed, "headline": headline,
               "wrong": total_wrong}
        write_json(args.json, doc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
