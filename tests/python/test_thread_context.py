"""What the calling thread's CUDA context is after Python calls with stream=: a thread that had none still
has none. The module's own stream marks (an event recorded on the caller's stream, queried and destroyed
later) ran CUDA runtime calls on the calling thread, which make the current device's primary context current
for good on a thread that has none (and create it, hundreds of MiB, on a GPU the manager does not use); the
C++ library leaves such a thread as it found it (tests/gpu/test_thread_context.cpp). Read from the driver
(cuCtxGetCurrent through ctypes)."""

from __future__ import annotations

import ctypes
import threading

import gpuxfer
import numpy as np
from frameworks import pattern


def current_context() -> int | None:
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    assert cuda.cuCtxGetCurrent(ctypes.byref(ctx)) == 0, "cuCtxGetCurrent failed"
    return ctx.value


def on_a_new_thread(work) -> tuple[int | None, int | None]:
    """(the context before, the context after) of work() run on a thread that has made no CUDA call."""
    seen: dict[str, object] = {}

    def run():
        try:
            seen["before"] = current_context()
            work()
            seen["after"] = current_context()
        except BaseException as e:  # reported by the test, not lost in the thread
            seen["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in seen:
        raise seen["error"]
    return seen["before"], seen["after"]


def test_stream_ordered_calls_on_a_thread_without_a_context_leave_it_without_one(manager, lib):
    transfer = gpuxfer.Transfer(manager)
    ordinal = manager.devices[0].ordinal
    nbytes = 1 << 16
    t = lib.upload(ordinal, pattern(0, nbytes))
    stream = lib.stream(ordinal)
    transfer.set_device_buffer(0, t, stream=stream)
    out = np.zeros(nbytes, dtype=np.uint8)
    results = []

    def work():
        transfer.gather_into(out, stream=stream)  # pageable: returns once the bytes are there
        handle = transfer.gather_all(stream=stream)
        handle.stream_wait(stream)
        results.extend(handle.get())
        transfer.gather_into(out, stream=stream)  # reaps the earlier calls' marks: queries and destroys

    before, after = on_a_new_thread(work)
    assert before is None, "a thread that made no CUDA call already has a current context"
    assert after is None, "a stream-ordered call left a context current on a thread that had none"
    np.testing.assert_array_equal(out, pattern(0, nbytes))
    np.testing.assert_array_equal(results[0], pattern(0, nbytes))
