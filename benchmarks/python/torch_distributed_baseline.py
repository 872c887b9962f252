#!/usr/bin/env python3
"""torch.distributed with the NCCL backend, one process per GPU, measured like gpuxfer-bench --ranks: the
same sizes (4 KiB to 1 GiB by default), a barrier before every sample, the slowest rank's time, the median
of the samples, every size's data verified once (destinations poisoned, a pattern per rank and size), and
the same rows and JSON shape as torch_baseline.py (``compare_to`` names the gpuxfer-bench --ranks
operation each one stands beside). Started by torchrun; alone it is a world of one:

    torchrun --nproc-per-node N benchmarks/python/torch_distributed_baseline.py [--short] [-b 4K -e 1G]
        [--json FILE] [--gpuxfer RANKS.json]

With ``--gpuxfer`` (gpuxfer launch -n N gpuxfer-bench --ranks --json RANKS.json, same N) it also prints
gpuxfer against torch per operation and size, and issue 11's targets at the headline size: gather to the
root's host >= 2 x torch's gather + .cpu(), broadcast of a device buffer >= 1.0 x torch's broadcast.

GB/s = bytes / time / 1e9. bytes: gathers and the all-gather = size per rank x ranks; the broadcast = the
payload size. time: time.perf_counter on every rank from the barrier to the call's end (with a
torch.cuda.synchronize); a sample is the slowest rank's. Only rank 0 prints and writes.

Exit codes: 0 when every byte was right (and every target met, with --gpuxfer), also when it skips (no
PyTorch, no NCCL, no CUDA device for a rank: it says why); 1 otherwise.
"""

import contextlib
import datetime
import json
import os
import socket
import sys
import time

import torch_baseline
from torch_baseline import POISON, parse_size, write_json

TOOL = "torch_distributed_baseline"
DEFAULT_MAX = "1G"
HEADLINE_SIZE = 256 << 20
CONVENTION = (
    "GB/s = bytes / time / 1e9. bytes: gathers and the all-gather = size per rank x ranks (total bytes "
    "moved); the broadcast = the payload size. time: time.perf_counter on every rank from a barrier to the "
    "call's end (torch.cuda.synchronize); a sample is the slowest rank's; median of the samples."
)
# gpuxfer-bench --ranks operation: issue 11's target for gpuxfer GB/s / torch GB/s at the headline size
TARGETS = {"rank_gather_to_host": 2.0, "rank_bcast": 1.0}
ALL_RANKS = "size x ranks (total bytes moved)"
PAYLOAD = "size (the payload: bytes / time)"


def launch_env(environ):
    """(rank, world size, local rank, ranks on this node, variables to set) from torchrun's environment;
    without RANK and WORLD_SIZE a world of one, with a rendezvous on a free local port."""
    if "RANK" in environ and "WORLD_SIZE" in environ:
        rank, world = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        return rank, world, int(environ.get("LOCAL_RANK", rank)), int(environ.get("LOCAL_WORLD_SIZE", world)), {}
    extra = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1"}
    if "MASTER_PORT" not in environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            extra["MASTER_PORT"] = str(s.getsockname()[1])
    return 0, 1, 0, 1, extra


def skip_reason(torch, local_world):
    """Why the ranks of this node cannot run (torch is None when it does not import), or None. Every rank
    of the node finds the same reason, so that none is left waiting for the others."""
    if torch is None:
        return "no PyTorch"
    if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        return "torch.distributed has no NCCL backend"
    if not torch.cuda.is_available():
        return "no CUDA device: torch.cuda.is_available() is False"
    if local_world > torch.cuda.device_count():
        return f"{local_world} ranks on this node, {torch.cuda.device_count()} GPU(s): NCCL needs one GPU per rank"
    return None


def seed_for(size, rank):
    """The pattern seed of rank `rank`'s data at `size`, as gpuxfer-bench --ranks makes one per both."""
    return size * 1000003 + rank + 1


def compare_gpuxfer(torch_rows, gpuxfer_results):
    """gpuxfer-bench --ranks rows against these rows, per operation and size: ratio = gpuxfer GB/s / torch
    GB/s, with issue 11's target where there is one (met is None at other sizes than the headline's)."""
    ours = {(r["op"], r["size"]): r for r in gpuxfer_results}
    sizes = sorted({r["size"] for r in torch_rows})
    head = HEADLINE_SIZE if HEADLINE_SIZE in sizes else (sizes[-1] if sizes else None)
    rows = []
    for t in torch_rows:
        g = ours.get((t.get("compare_to"), t["size"]))
        if g is None or not t["gbps"]:
            continue
        ratio = g["gbps"] / t["gbps"]
        target = TARGETS.get(t["compare_to"]) if t["size"] == head else None
        rows.append({"op": t["compare_to"], "vs": t["op"], "size": t["size"], "gpuxfer_gbps": g["gbps"],
                     "torch_gbps": t["gbps"], "ratio": ratio, "target": target,
                     "met": None if target is None else ratio >= target})
    return rows


def comparison_line(r):
    target = f">= {r['target']:.2f}: {'met' if r['met'] else 'BELOW'}" if r["target"] is not None else ""
    return (f"# {r['op']:<22} {r['vs']:<24} {r['size']:>12} {r['gpuxfer_gbps']:10.2f} {r['torch_gbps']:10.2f} "
            f"{r['ratio']:8.3f}  {target}").rstrip()


def missed_targets(rows, torch_rows):
    """The targets not met at the headline size, or not measured there at all."""
    measured = {r["op"] for r in rows if r["target"] is not None}
    ran = {t.get("compare_to") for t in torch_rows}
    missed = [r["op"] for r in rows if r["met"] is False]
    return missed + [op for op in TARGETS if op in ran and op not in measured]


class Ranks:
    """This rank's process group, device and patterns; the samples' barrier and their combination. Looks
    like torch_baseline's Bench to its measure_sizes: `devices` (one per rank, for the byte count) and `run`."""

    def __init__(self, torch, rank, world, local_rank):
        self.torch, self.dist = torch, torch.distributed
        self.rank, self.world, self.local_rank = rank, world, local_rank
        self.device = torch.device("cuda", local_rank)
        self.devices = list(range(world))
        self.run = 0
        self.cases = {}  # (op, size) -> its buffers and closures, built (and verified) at its first sample

    def pattern(self, size, rank):
        g = self.torch.Generator(device=self.device)
        g.manual_seed(seed_for(size, rank))
        return self.torch.randint(0, 256, (size,), dtype=self.torch.uint8, device=self.device, generator=g)

    def empty(self, size):
        return self.torch.empty(size, dtype=self.torch.uint8, device=self.device)

    def wrong(self, got, size, rank):
        if got.numel() != size:
            return size
        return int((got.reshape(-1).to(self.device) != self.pattern(size, rank)).sum().item())

    def sample(self, case, verify):
        """One sample on every rank: (the slowest rank's seconds, every rank's wrong bytes)."""
        poison, work, check = case
        if verify:
            poison()
        self.torch.cuda.synchronize(self.device)
        self.dist.barrier(device_ids=[self.local_rank])
        self.torch.cuda.synchronize(self.device)
        start = time.perf_counter()
        work()
        self.torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - start
        wrong = check() if verify else 0
        t = self.torch.tensor([seconds], dtype=self.torch.float64, device=self.device)
        w = self.torch.tensor([wrong], dtype=self.torch.int64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        self.dist.all_reduce(w, op=self.dist.ReduceOp.SUM)
        return float(t.item()), int(w.item())

    def op(self, build):
        """An operation as torch_baseline.measure calls it, fn(bench, size) -> (seconds, wrong): its first
        call at a size builds the buffers and runs the verified sample before the one it returns."""

        def fn(_, size):
            key = (build.__name__, size)
            verified = 0
            if key not in self.cases:
                self.cases.clear()  # one size at a time: GPU memory is precious at 1 GiB x ranks
                self.torch.cuda.empty_cache()
                self.cases[key] = build(self, size)
                verified = self.sample(self.cases[key], True)[1]
            seconds, _ = self.sample(self.cases[key], False)
            return seconds, verified

        return fn


# --- the operations: each builds (poison, work, check) for one size on this rank ---------------------------


def gather_cpu(r, size):
    src = r.pattern(size, r.rank)
    parts = [r.empty(size) for _ in range(r.world)] if r.rank == 0 else None
    out = []

    def poison():
        for p in parts or []:
            p.fill_(POISON)

    def work():
        r.dist.gather(src, parts, dst=0)
        out[:] = [p.cpu() for p in parts] if parts else []

    def check():
        if r.rank != 0:
            return 0
        missing = (r.world - len(out)) * size
        return missing + sum(r.wrong(c, size, k) for k, c in enumerate(out))

    return poison, work, check


def broadcast(r, size):
    buf = r.pattern(size, 0) if r.rank == 0 else r.empty(size)

    def poison():
        if r.rank != 0:
            buf.fill_(POISON)

    return poison, lambda: r.dist.broadcast(buf, src=0), lambda: r.wrong(buf, size, 0)


def all_gather(r, size):
    src, out = r.pattern(size, r.rank), r.empty(size * r.world)

    def check():
        return sum(r.wrong(out[k * size:(k + 1) * size], size, k) for k in range(r.world))

    return lambda: out.fill_(POISON), lambda: r.dist.all_gather_into_tensor(out, src), check


# name, builder, compare_to (gpuxfer-bench --ranks op), bytes rule, bytes(size, ranks), what
OPS = [
    ("torch_dist_gather_cpu", gather_cpu, "rank_gather_to_host", ALL_RANKS, lambda s, n: s * n,
     "dist.gather(t, gather_list on rank 0, dst=0), then .cpu() of every part on rank 0"),
    ("torch_dist_broadcast", broadcast, "rank_bcast", PAYLOAD, lambda s, n: s, "dist.broadcast(t, src=0)"),
    ("torch_dist_all_gather", all_gather, "rank_all_gather", ALL_RANKS, lambda s, n: s * n,
     "dist.all_gather_into_tensor(out, t)"),
]


def parse_args(argv):
    def more(p):
        p.set_defaults(maxbytes=parse_size(DEFAULT_MAX))
        p.add_argument("--gpuxfer", default="", help="gpuxfer-bench --ranks --json output to compare with")

    return torch_baseline.parse_args(argv, [o[0] for o in OPS], more, __doc__.split("\n\n")[0])


def import_torch():
    try:
        import torch
        import torch.distributed  # noqa: F401 - makes torch.distributed reachable
    except ImportError:
        return None
    return torch


def runner(torch, r):
    nccl = torch.cuda.nccl.version()
    return {"ranks": r.world, "names": [torch.cuda.get_device_name(r.device)],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "torch_version": torch.__version__, "cuda_version": torch.version.cuda,
            "nccl_version": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)}


def report(args, info, results, waived, failed, wrong):
    """Rank 0's closing lines (and JSON); returns the exit code."""
    rows, missed = [], []
    if args.gpuxfer:
        with open(args.gpuxfer) as f:
            rows = compare_gpuxfer(results, json.load(f).get("results", []))
        missed = missed_targets(rows, results)
        print(f"#\n# gpuxfer-bench --ranks ({args.gpuxfer}) against torch.distributed: "
              "ratio = gpuxfer GB/s / torch GB/s")
        print(f"# {'op':<22} {'vs':<24} {'size':>12} {'gpuxfer':>10} {'torch':>10} {'ratio':>8}  target")
        for r in rows:
            print(comparison_line(r))
    ok = wrong == 0 and not failed and not missed
    print(f"#\n# {TOOL}: {'OK' if ok else 'FAILED'}: {wrong} wrong bytes, {len(failed)} failed, {len(waived)} waived"
          + (f", targets missed: {','.join(missed)}" if missed else ""))
    if args.json:
        write_json(args.json, {"schema": "gpuxfer-bench/1", "tool": TOOL, "convention": CONVENTION, "runner": info,
                               "ceilings": {}, "results": results, "waived": waived, "failed": failed,
                               "versus_gpuxfer": rows, "wrong": wrong})
    return 0 if ok else 1


def main(argv, environ=os.environ, load_torch=import_torch):
    args = parse_args(argv)
    rank, world, local_rank, local_world, extra = launch_env(environ)
    torch = load_torch()
    why = skip_reason(torch, local_world)
    if why:
        print(f"{TOOL}: skipped: {why}")
        return 0
    environ.update(extra)
    torch.cuda.set_device(local_rank)
    torch.distributed.init_process_group("nccl", device_id=torch.device("cuda", local_rank),
                                         timeout=datetime.timedelta(seconds=300))
    try:
        r = Ranks(torch, rank, world, local_rank)
        info = runner(torch, r)
        out = sys.stdout if rank == 0 else open(os.devnull, "w")
        with contextlib.redirect_stdout(out):
            print(f"# {TOOL}, {info['date']}: torch {info['torch_version']}, CUDA {info['cuda_version']}, "
                  f"NCCL {info['nccl_version']}, {world} ranks, rank 0 on {info['names'][0]}")
            print(f"# sizes per rank: {args.sizes[0]} .. {args.sizes[-1]}; warm-up {args.warmup}, median of "
                  f"{args.iters}; each size's data verified once, before the warm-up")
            print(f"# {CONVENTION}")
            ops = [(name, r.op(build), compare_to, nbytes, 1,
                    f"{what}\n#   bytes = {rule}; compare with gpuxfer-bench --ranks's {compare_to}")
                   for name, build, compare_to, rule, nbytes, what in OPS]
            results, waived, failed, wrong = torch_baseline.run_ops(r, ops, args, r.devices, "torch")
            code = report(args, info, results, waived, failed, wrong) if rank == 0 else 0
    finally:
        torch.distributed.destroy_process_group()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
