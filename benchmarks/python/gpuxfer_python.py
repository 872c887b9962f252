#!/usr/bin/env python3
"""gpuxfer's Python API measured like gpuxfer-bench and torch_baseline.py: the same sizes, warm-up, median,
every sample's data checked, the same JSON shape; ``compare_to`` names the C++ operation each row stands
beside. With ``--cpp bench.json`` (gpuxfer-bench --json) it prints Python against C++ per operation and
size: the time above C++ (targets: 4 KiB gather at most 2 us above) and the throughput ratio (256 MiB
gather at least 0.98 x C++). Its last lines give both targets' numbers and PASS or MISS, the summary line
too; a target that the two runs did not both measure is missed. Run torch_baseline.py beside it for
torch.cuda.comm.

Exit codes: 0 when every byte was right (and every target met, with --cpp), 1 otherwise, 2 without
gpuxfer, PyTorch or a CUDA device.
"""

import json
import sys
import time

import torch_baseline
from torch_baseline import CONVENTION, POISON, Bench, runner_info

# (C++ op, size): (most microseconds above C++, least throughput ratio to C++)
TARGETS = {("gather", 4 << 10): (2.0, None), ("gather", 256 << 20): (None, 0.98)}


class PyBench(Bench):
    """torch_baseline's patterns and checks, with a gpuxfer Transfer over the same devices."""

    def __init__(self, torch, gpuxfer):
        self.gpuxfer = gpuxfer
        self.manager = gpuxfer.Manager()
        self.transfer = gpuxfer.Transfer(self.manager)
        super().__init__(torch, [d.ordinal for d in self.manager.devices])
        self.host = {}  # (kind, size) -> reused host memory (registered ones keep their registration)
        # Registered with a stream of their own per device, as gpuxfer-bench registers its sources: the
        # legacy default stream (torch's default) costs every operation about 3 us more (an event recorded
        # on it, and its wait for the reads), measured on the H200 runner, which would not be Python's cost.
        self.streams = [torch.cuda.Stream(device=d) for d in self.devices]

    def registered(self, sources):
        for i, s in enumerate(sources):
            self.transfer.set_device_buffer(i, s, stream=self.streams[i])

    def host_memory(self, kind, size):
        key = (kind, size)
        if key not in self.host:
            self.host.clear()  # one size at a time
            out = self.torch.empty(size, dtype=self.torch.uint8, pin_memory=kind == "pinned").numpy()
            self.host[key] = (out, self.gpuxfer.register_host(out) if kind == "registered" else None)
        out = self.host[key][0]
        out.fill(POISON)
        return out

    def wrong_host(self, array, seed, device, size):
        return self.wrong(self.torch.from_numpy(array), seed, device, size)


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out  # every call measured here returns with its data in place


def op_gather(bench, size):
    srcs = bench.sources(size)
    bench.registered(srcs)
    seconds, arrays = timed(bench.transfer.gather_all)
    return seconds, sum(bench.wrong_host(a, bench.seed(d), d, size) for a, d in zip(arrays, bench.devices))


def gather_into(kind):
    def op(bench, size):
        srcs = bench.sources(size)
        bench.registered(srcs)
        out = bench.host_memory(kind, size * len(bench.devices))
        seconds, _ = timed(lambda: bench.transfer.gather_into(out))
        return seconds, sum(
            bench.wrong_host(out[k * size : (k + 1) * size], bench.seed(d), d, size)
            for k, d in enumerate(bench.devices)
        )

    return op


def op_gather_to_device(bench, size):
    srcs = bench.sources(size)
    bench.registered(srcs)
    root = bench.devices[0]
    out = bench.torch.full((size * len(srcs),), POISON, dtype=bench.torch.uint8, device=f"cuda:{root}")
    bench.sync()
    seconds, _ = timed(lambda: bench.transfer.gather_to_device(0, out))
    return seconds, sum(
        bench.wrong(out[k * size : (k + 1) * size], bench.seed(d), root, size)
        for k, d in enumerate(bench.devices)
    )


def broadcast(pinned):
    def op(bench, size):
        outs = [
            bench.torch.full((size,), POISON, dtype=bench.torch.uint8, device=f"cuda:{d}")
            for d in bench.devices
        ]
        bench.registered(outs)
        host, seed = bench.host_source(size, pinned)
        seconds, _ = timed(lambda: bench.transfer.broadcast(host))
        return seconds, sum(bench.wrong(o, seed, d, size) for o, d in zip(outs, bench.devices))

    return op


def op_copy(bench, size):
    src = bench.sources(size)[0]
    dst = bench.torch.full((size,), POISON, dtype=bench.torch.uint8, device=f"cuda:{bench.devices[1]}")
    bench.registered([src, dst])
    bench.sync()
    seconds, _ = timed(lambda: bench.transfer.copy_device_buffer(0, 1))
    return seconds, bench.wrong(dst, bench.seed(bench.devices[0]), bench.devices[1], size)


def op_bcast_device(bench, size):
    srcs = bench.sources(size)
    for s in srcs[1:]:
        s.fill_(POISON)
    bench.registered(srcs)
    bench.sync()
    seconds, _ = timed(lambda: bench.transfer.broadcast_from_device(0))
    root_seed = bench.seed(bench.devices[0])
    return seconds, sum(bench.wrong(s, root_seed, d, size) for s, d in zip(srcs, bench.devices))


EVERY = lambda s, n: s * n  # noqa: E731 - bytes = size x devices
ONE = lambda s, n: s  # noqa: E731 - bytes = size
# name, function, compare_to (the C++ bench's op), bytes(size, devices), devices needed, what
OPS = [
    (
        "py_gather",
        op_gather,
        "gather",
        EVERY,
        1,
        "transfer.gather_all(): numpy arrays over pinned HostBuffers",
    ),
    (
        "py_gather_registered",
        gather_into("registered"),
        "gather_registered",
        EVERY,
        1,
        "transfer.gather_into(numpy array registered with gpuxfer.register_host)",
    ),
    (
        "py_gather_pageable",
        gather_into("pageable"),
        "gather_pageable",
        EVERY,
        1,
        "transfer.gather_into(pageable numpy array)",
    ),
    (
        "py_gather_to_device",
        op_gather_to_device,
        "gather_to_device",
        EVERY,
        1,
        "transfer.gather_to_device(0, cuda tensor)",
    ),
    ("py_bcast_pinned", broadcast(True), "bcast_pinned", ONE, 1, "transfer.broadcast(pinned CPU tensor)"),
    (
        "py_bcast_pageable",
        broadcast(False),
        "bcast_pageable",
        ONE,
        1,
        "transfer.broadcast(pageable CPU tensor)",
    ),
    ("py_copy_peer", op_copy, "copy_peer", ONE, 2, "transfer.copy_device_buffer(0, 1), automatic path"),
    ("py_bcast_device", op_bcast_device, "bcast_device", ONE, 2, "transfer.broadcast_from_device(0)"),
]


def compare(py_results, cpp_results):
    """Rows of Python against C++ for each (op, size) both measured, with the targets that apply."""
    cpp = {(r["op"], r["size"]): r for r in cpp_results if "time_us" in r and "size" in r}
    rows = []
    for r in py_results:
        c = cpp.get((r["compare_to"], r["size"]))
        if c is None:
            continue
        above_us = r["time_us"] - c["time_us"]
        ratio = c["time_us"] / r["time_us"] if r["time_us"] > 0 else 0.0
        most_above, least_ratio = TARGETS.get((r["compare_to"], r["size"]), (None, None))
        met = (most_above is None or above_us <= most_above) and (least_ratio is None or ratio >= least_ratio)
        target = " and ".join(
            t
            for t in (
                f"<= {most_above} us above" if most_above is not None else "",
                f">= {least_ratio} x" if least_ratio is not None else "",
            )
            if t
        )
        rows.append(
            {
                "op": r["op"],
                "cpp_op": r["compare_to"],
                "size": r["size"],
                "py_us": r["time_us"],
                "cpp_us": c["time_us"],
                "above_us": above_us,
                "ratio": ratio,
                "target": target or None,
                "met": met,
            }
        )
    return rows


def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def verdicts(rows):
    """One verdict per TARGETS entry from compare's rows: {name, measure, times, met}. A target no row
    measured (the C++ JSON or this run lacks that op and size) is missed, so that it never passes unmeasured."""
    out = []
    for (op, size), (most_above, least_ratio) in TARGETS.items():
        v = {"name": f"{human(size)} {op}", "measure": "not measured", "times": "", "met": False}
        r = next((r for r in rows if r["cpp_op"] == op and r["size"] == size), None)
        if r is None:
            v["times"] = f"no {op} row of {size} bytes in both runs"
        else:
            if most_above is not None:
                v["measure"] = f"{r['above_us']:+.2f} us against C++ (at most +{most_above})"
            else:
                v["measure"] = f"{r['ratio']:.3f} x C++ (at least {least_ratio})"
            v["times"] = f"python {r['py_us']:.2f} us, C++ {r['cpp_us']:.2f} us"
            v["met"] = r["met"]
        out.append(v)
    return out


def verdict(v):
    return "PASS" if v["met"] else "MISS"


def parse_args(argv):
    def cpp(p):
        p.add_argument("--cpp", default="", help="gpuxfer-bench --json output to compare with")

    return torch_baseline.parse_args(argv, [o[0] for o in OPS], cpp, __doc__.split("\n\n")[0])


def run(bench, args):
    ops = [(name, fn, compare_to, nbytes, need, f"{what}; compare with gpuxfer-bench's {compare_to}")
           for name, fn, compare_to, nbytes, need, what in OPS]
    return torch_baseline.run_ops(bench, ops, args, bench.devices, "python")


def frameworks():
    """gpuxfer and torch, or the ImportError that says which is missing."""
    import gpuxfer
    import torch

    return gpuxfer, torch


def main(argv):
    args = parse_args(argv)
    try:
        gpuxfer, torch = frameworks()
    except ImportError as e:
        print(f"gpuxfer_python: {e}", file=sys.stderr)
        return 2
    try:
        bench = PyBench(torch, gpuxfer)
    except gpuxfer.NoDeviceError as e:
        print(f"gpuxfer_python: {e}", file=sys.stderr)
        return 2
    info = dict(runner_info(torch, bench.devices), gpuxfer_version=gpuxfer.__version__)
    print(
        f"# gpuxfer_python {gpuxfer.__version__}, {info['date']}: torch {info['torch_version']}, "
        f"{len(bench.devices)} devices: {', '.join(info['names'])}"
    )
    print(f"# warm-up {args.warmup}, median of {args.iters}; {CONVENTION}")
    results, waived, failed, wrong = run(bench, args)
    rows = []
    if args.cpp:
        with open(args.cpp) as f:
            rows = compare(results, json.load(f).get("results", []))
        print(
            f"#\n# Python against C++ ({args.cpp})\n# {'op':<22} {'size':>10} {'py(us)':>10} {'C++(us)':>10} "
            f"{'above(us)':>10} {'ratio':>7}  target"
        )
        for r in rows:
            print(
                f"  {r['op']:<22} {r['size']:10d} {r['py_us']:10.2f} {r['cpp_us']:10.2f} {r['above_us']:10.2f} "
                f"{r['ratio']:7.3f}  {r['target'] or ''}{'' if r['met'] else '  MISSED'}"
            )
    checked = verdicts(rows) if args.cpp else []
    print("#\n# the issue's targets, Python against C++:")
    for v in checked:
        print(f"# target {v['name']}: {v['measure']}; {v['times']}: {verdict(v)}")
    if not args.cpp:
        print("# targets: not checked: run with --cpp bench.json (gpuxfer-bench --json) to check them")
    missed = sum(not r["met"] for r in rows) + sum(v["measure"] == "not measured" for v in checked)
    ok = wrong == 0 and not failed and missed == 0
    print(
        f"# gpuxfer_python: {'OK' if ok else 'FAILED'}: {wrong} wrong bytes, {len(failed)} failed, "
        f"{len(waived)} waived, {missed} targets missed"
        + "".join(f"; {v['name']} {v['measure']}: {verdict(v)}" for v in checked)
    )
    if args.json:
        doc = {
            "schema": "gpuxfer-bench/1",
            "tool": "gpuxfer_python",
            "convention": CONVENTION,
            "runner": info,
            "results": results,
            "waived": waived,
            "failed": failed,
            "versus_cpp": rows,
            "targets": checked,
            "wrong": wrong,
        }
        torch_baseline.write_json(args.json, doc)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
