#!/usr/bin/env python3
"""gpuxfer's Python API measured like gpuxfer-bench and torch_baseline.py: the same sizes, warm-up, median,
every sample's data checked, the same JSON shape; ``compare_to`` names the C++ operation each row stands
beside. The gather's two targets (4 KiB: at most 2 us above the C++ call; 256 MiB: at least 0.98 x C++)
are measured in this process: rounds of C++ calls (timed in C++, ``Transfer._time_gather_all``) and as
many Python calls take turns, a tenth of the round at a time (200 calls a round at 4 KiB, 5 at 256 MiB),
each side's clock stopped before the previous call's results are let go of, and the round with the least
difference counts. Single calls after each sample's preparation in another process are too noisy for
either: +3 to +10 us at 4 KiB on one runner, and at 256 MiB the D2H link itself varies by a few percent
from process to process. With ``--cpp bench.json`` (gpuxfer-bench --json) it also prints Python against
C++ per operation and size, without targets. Its last lines give the targets' numbers and PASS or MISS,
the summary line too; a target that was not measured is missed. Run torch_baseline.py beside it for
torch.cuda.comm.

Exit codes: 0 when every byte was right (and every target met, with --cpp), 1 otherwise, 2 without
gpuxfer, PyTorch or a CUDA device.
"""

import json
import statistics
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


# Targets measured within this process, C++ and Python interleaved (interleaved_row): their rows against
# gpuxfer-bench's JSON, another process's single calls, are shown without a target.
IN_PROCESS = {("gather", 4 << 10), ("gather", 256 << 20)}
INTERLEAVED_ROUNDS = 5
INTERLEAVED_CALLS = {4 << 10: 200, 256 << 20: 5}  # calls a round, per size per device
INTERLEAVED_BLOCKS = 10  # turns a round: C++ and Python alternate calls // INTERLEAVED_BLOCKS calls at a time


def target_row(op, cpp_op, size, py_us, cpp_us, targeted=True):
    """A row of Python against C++ with the target of (cpp_op, size), if any and @p targeted."""
    above_us = py_us - cpp_us
    ratio = cpp_us / py_us if py_us > 0 else 0.0
    most_above, least_ratio = TARGETS.get((cpp_op, size), (None, None)) if targeted else (None, None)
    met = (most_above is None or above_us <= most_above) and (least_ratio is None or ratio >= least_ratio)
    target = " and ".join(
        t
        for t in (
            f"<= {most_above} us above" if most_above is not None else "",
            f">= {least_ratio} x" if least_ratio is not None else "",
        )
        if t
    )
    return {
        "op": op,
        "cpp_op": cpp_op,
        "size": size,
        "py_us": py_us,
        "cpp_us": cpp_us,
        "above_us": above_us,
        "ratio": ratio,
        "target": target or None,
        "met": met,
    }


def interleaved_row(rounds, size=4 << 10):
    """The in-process row of a gather of @p size per device from @p rounds, (python us, C++ us) medians of
    alternating rounds: the round where Python is the least above C++ (noise only adds time, to either
    side, and a round's medians keep one stray call from choosing it); every round is kept in the row."""
    py_us, cpp_us = min(rounds, key=lambda r: r[0] - r[1])
    row = target_row("py_gather_interleaved", "gather", size, py_us, cpp_us)
    row["method"] = f"this process, C++ and Python alternating, best of {len(rounds)} rounds"
    row["rounds"] = [{"py_us": p, "cpp_us": c} for p, c in rounds]
    return row


def measure_interleaved(bench, size=4 << 10, rounds=INTERLEAVED_ROUNDS, calls=None):
    """Rounds of @p calls (INTERLEAVED_CALLS's for @p size when None) blocking gather_all calls timed in
    C++ (Transfer._time_gather_all: steady_clock around the C++ call, no Python in between) and as many
    from Python, over the same registered buffers of @p size per device, the two taking turns a block of
    calls at a time (INTERLEAVED_BLOCKS); a Python call's clock, like a C++ call's, stops before the
    previous results are let go of. Returns (rounds as interleaved_row takes them, wrong bytes of the
    last Python call's arrays)."""
    calls = calls or INTERLEAVED_CALLS[size]
    bench.registered(bench.sources(size))
    transfer = bench.transfer
    # Warmed up as the Python rounds call: the last call's arrays alive during the next, so that the pool
    # holds both blocks before any call is timed.
    arrays = None
    for _ in range(max(2, calls // 4)):
        arrays = transfer.gather_all()
    del arrays
    block = max(1, calls // INTERLEAVED_BLOCKS)
    out = []
    for _ in range(rounds):
        cpp, samples = [], []
        # C++ and Python take turns a block at a time, so that a change of pace within the round (this
        # runner's 4 KiB calls have two, about 1.5 us apart) falls on both sides alike.
        for first in range(0, calls, block):
            n = min(block, calls - first)
            cpp += transfer._time_gather_all(n)
            for _ in range(n):
                start = time.perf_counter()
                fresh = transfer.gather_all()
                samples.append(time.perf_counter() - start)
                # The previous call's arrays go back to the pool here, off the clock, as the C++ calls
                # give their results back after their clock stops: both sides time the call alone.
                arrays = fresh
        out.append((statistics.median(samples) * 1e6, statistics.median(cpp) * 1e6))
    wrong = sum(bench.wrong_host(a, bench.seed(d), d, size) for a, d in zip(arrays, bench.devices))
    return out, wrong


LOOP_CALLS = 8  # calls of the user's loop; its first call is timed too, as the user's is


def measure_loop(bench, size, reserve):
    """A user's loop on a fresh Manager: ``r = transfer.gather_all()`` LOOP_CALLS times over one buffer of
    `size` bytes per device, the previous result kept until the next call returns (as the loop keeps it).
    With `reserve` the Manager pins two blocks of `size` per device when it is made (pool_reserve), outside
    the timing; without, the loop pins them itself. Returns (GB/s over the whole loop, wrong bytes)."""
    manager = bench.gpuxfer.Manager(pool_reserve=f"2x{size}" if reserve else [])
    transfer = bench.gpuxfer.Transfer(manager)
    sources = bench.sources(size)
    for i, src in enumerate(sources):
        transfer.set_device_buffer(i, src, stream=bench.streams[i])
    bench.sync()
    start = time.perf_counter()
    r = None
    for _ in range(LOOP_CALLS):
        r = transfer.gather_all()
    seconds = time.perf_counter() - start
    wrong = sum(bench.wrong_host(a, bench.seed(d), d, size) for d, a in enumerate(r))
    del r, transfer, manager
    return LOOP_CALLS * size * len(bench.devices) / seconds / 1e9, wrong


def measure_torch_loop(bench, size):
    """torch's way of the same loop: a pinned tensor per device allocated once, outside the timing, and
    ``host.copy_(src)`` LOOP_CALLS times. Returns (GB/s, wrong bytes)."""
    torch = bench.torch
    sources = bench.sources(size)
    hosts = [torch.empty(size, dtype=torch.uint8, pin_memory=True) for _ in sources]
    bench.sync()
    start = time.perf_counter()
    for _ in range(LOOP_CALLS):
        for h, src in zip(hosts, sources):
            h.copy_(src)
    seconds = time.perf_counter() - start
    wrong = sum(bench.wrong(h, bench.seed(d), d, size) for d, h in enumerate(hosts))
    return LOOP_CALLS * size * len(bench.devices) / seconds / 1e9, wrong


def compare(py_results, cpp_results, in_process=frozenset()):
    """Rows of Python against C++ for each (op, size) both measured, with the targets that apply (none for
    the (C++ op, size) pairs in @p in_process, which are judged within this process instead)."""
    cpp = {(r["op"], r["size"]): r for r in cpp_results if "time_us" in r and "size" in r}
    rows = []
    for r in py_results:
        key = (r["compare_to"], r["size"])
        c = cpp.get(key)
        if c is None:
            continue
        rows.append(target_row(r["op"], r["compare_to"], r["size"], r["time_us"], c["time_us"], key not in in_process))
    return rows


def row_line(r):
    """One row of Python against C++, as the tables print it."""
    return (
        f"  {r['op']:<22} {r['size']:10d} {r['py_us']:10.2f} {r['cpp_us']:10.2f} {r['above_us']:10.2f} "
        f"{r['ratio']:7.3f}  {r['target'] or ''}{'' if r['met'] else '  MISSED'}"
    )


def human(size):
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def verdicts(rows, only=None):
    """One verdict per TARGETS entry (those in @p only, when given) from the rows (interleaved_row's first,
    then compare's): {name, measure, times, met}. A target no row measured (the C++ JSON or this run lacks
    that op and size) is missed, so that it never passes unmeasured."""
    out = []
    for (op, size), (most_above, least_ratio) in TARGETS.items():
        if only is not None and (op, size) not in only:
            continue
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
    in_process = set()
    for op, size in sorted(IN_PROCESS, key=lambda k: k[1]):
        if "py_gather" not in args.ops or size not in args.sizes:
            continue
        rounds, bad = measure_interleaved(bench, size)
        wrong += bad
        r = interleaved_row(rounds, size)
        rows.append(r)
        in_process.add((op, size))
        print(
            f"#\n# Python against C++ in this process, {human(size)} gather_all, {INTERLEAVED_CALLS[size]} calls "
            f"a round, alternating:\n"
            + "".join(f"#   round: python {p['py_us']:.2f} us, C++ {p['cpp_us']:.2f} us\n" for p in r["rounds"])
            + row_line(r)
        )
    loop_size = 256 << 20
    if "py_gather" in args.ops and loop_size in args.sizes:
        loops = {}
        for name, fn in (("pool_reserve 2 blocks", lambda: measure_loop(bench, loop_size, True)),
                         ("no reserve", lambda: measure_loop(bench, loop_size, False)),
                         ("torch pinned copy_", lambda: measure_torch_loop(bench, loop_size))):
            loops[name], bad = fn()
            wrong += bad
        print(f"#\n# a user's loop, {LOOP_CALLS} calls of {human(loop_size)} per device from its first call, the "
              f"previous result kept (GB/s, informational):\n"
              + "".join(f"#   {name:<24} {gbps:7.2f}\n" for name, gbps in loops.items()))
    if args.cpp:
        with open(args.cpp) as f:
            cpp_rows = compare(results, json.load(f).get("results", []), in_process)
        print(
            f"#\n# Python against C++ ({args.cpp})\n# {'op':<22} {'size':>10} {'py(us)':>10} {'C++(us)':>10} "
            f"{'above(us)':>10} {'ratio':>7}  target"
        )
        for r in cpp_rows:
            print(row_line(r))
        rows += cpp_rows
    checked = verdicts(rows) if args.cpp else verdicts(rows, only=in_process)
    print("#\n# the issue's targets, Python against C++:")
    for v in checked:
        print(f"# target {v['name']}: {v['measure']}; {v['times']}: {verdict(v)}")
    if not args.cpp:
        print("# targets against gpuxfer-bench: not checked: run with --cpp bench.json (gpuxfer-bench --json)")
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
