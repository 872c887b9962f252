"""One rank of test_communicator.py's job of several processes, started by `gpuxfer launch -n N`:
joins with Communicator.from_environment(), runs every check of comm_checks.py in both forms with the
framework named by the first argument (torch or cupy), and prints "rank R of N: K checks passed", or the
first failure and exits 1 (gpuxfer launch then stops the other ranks and exits with that code). With the
argument "join" it only joins, and prints "rank R of N: joined on device D" (or the error, exit code 1).
"""

from __future__ import annotations

import sys
import traceback

import gpuxfer
from comm_checks import OPERATIONS
from frameworks import load


def main() -> int:
    lib = None if sys.argv[1] == "join" else load(sys.argv[1])
    comm = gpuxfer.Communicator.from_environment()
    where = f"rank {comm.rank} of {comm.world_size}"
    if lib is None:
        print(f"{where}: joined on device {comm.device}", flush=True)
        return 0
    print(f"{where}: device {comm.device}, timeout {comm.timeout}", flush=True)
    checks = 0
    for name, check in OPERATIONS.items():
        for form in ("blocking", "stream"):
            stream = lib.stream(comm.device) if form == "stream" else None
            try:
                check(comm, lib, stream)
            except Exception:  # every failure, gpuxfer's or an assertion, is this rank's report
                print(f"{where}: {name} ({form}) FAILED\n{traceback.format_exc()}", flush=True)
                return 1
            checks += 1
    print(f"{where}: {checks} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
