#!/usr/bin/env python3
"""What the registering stream costs a small operation: a 4 KiB gather_all from Python with the buffer
registered on torch's default stream (the legacy default stream) against one registered on a stream of
its own, and the Python call layers around it (gather_into pinned and registered memory, a call that does
nothing). Median of many calls after a warm-up; the data is checked once at the end.

    PYTHONPATH=build-gpu/python python3 benchmarks/python/registration_cost.py [--calls 3000]

Exit codes: 0 when the gathered bytes were right, 1 otherwise, 2 without gpuxfer, torch or a GPU.
"""

import argparse
import sys
import time


def median_us(fn, calls):
    for _ in range(calls // 10):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[len(samples) // 2] * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    try:
        import numpy as np
        import torch

        import gpuxfer
    except ImportError as error:
        print(f"registration_cost: {error}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("registration_cost: no CUDA device", file=sys.stderr)
        return 2
    manager = gpuxfer.Manager()
    transfer = gpuxfer.Transfer(manager)
    source = torch.arange(4096, dtype=torch.int32).to(torch.uint8).cuda()
    torch.cuda.synchronize()
    pinned = torch.empty(4096, dtype=torch.uint8, pin_memory=True).numpy()
    registered = np.empty(4096, dtype=np.uint8)
    registration = gpuxfer.register_host(registered)
    rows = []
    transfer.set_device_buffer(0, source)  # torch's current stream: its default, the legacy default stream
    rows.append(("gather_all, registered on torch's default stream", median_us(transfer.gather_all, args.calls)))
    rows.append(("gather_into pinned memory, same", median_us(lambda: transfer.gather_into(pinned), args.calls)))
    rows.append(("gather_into registered memory, same", median_us(lambda: transfer.gather_into(registered), args.calls)))
    own = torch.cuda.Stream()
    transfer.set_device_buffer(0, source, stream=own)
    rows.append(("gather_all, registered on a stream of its own", median_us(transfer.gather_all, args.calls)))
    rows.append(("a call that does nothing (Manager.device_count)", median_us(lambda: manager.device_count, args.calls)))
    print(f"# registration_cost: 4 KiB, median of {args.calls} calls, gpuxfer {gpuxfer.__version__}, torch {torch.__version__}")
    for what, us in rows:
        print(f"  {what:<52} {us:8.2f} us")
    wrong = int((torch.from_numpy(transfer.gather_all()[0]) != source.cpu()).sum())
    print(f"# registration_cost: {'OK' if wrong == 0 else 'FAILED'}: {wrong} wrong bytes")
    del registration
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
