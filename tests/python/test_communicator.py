"""gpuxfer.Communicator: its argument and environment checks (no GPU needed), creation without a GPU
(NoDeviceError with CUDA's reason), every operation in a world of one with torch and with cupy tensors in
both forms, byte for byte (comm_checks.py), and a world of two started by `gpuxfer launch -n 2`
(comm_ranks.py on each rank). The GPU tests skip, saying why, without enough GPUs.
"""

from __future__ import annotations

import datetime
import gc
import os
import pathlib
import re
import shutil
import subprocess
import sys
import weakref

import gpuxfer
import numpy as np
import pytest
from comm_checks import OPERATIONS, SIZE, SLACK, check_broadcast_from_host, produce
from conftest import DEVICE_COUNT, needs_devices
from frameworks import POISON, pattern

HERE = pathlib.Path(__file__).resolve().parent
LAUNCHER_VARIABLES = [
    "GPUXFER_RANK",
    "GPUXFER_WORLD_SIZE",
    "GPUXFER_LOCAL_RANK",
    "GPUXFER_INIT",
    "GPUXFER_TIMEOUT",
    "GPUXFER_NODE_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
]


@pytest.fixture
def environment(monkeypatch):
    """No launcher's variables (a test sets those it needs): the process is a job of one."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def expect_error(cls, match, call):
    with pytest.raises(cls, match=match) as caught:
        call()
    assert type(caught.value) is cls and caught.value.code == cls.code
    return caught.value


# --- Checks before any CUDA call: the same with a GPU or without ---------------------------------------

BAD_ARGUMENTS = [
    ((0, 0), {}, gpuxfer.InvalidArgumentError, "world_size is 0"),
    ((2, 2, "tcp://127.0.0.1:1"), {}, gpuxfer.InvalidArgumentError, "rank 2 is out of range"),
    ((-1, 2, "tcp://127.0.0.1:1"), {}, gpuxfer.InvalidArgumentError, "rank -1 is out of range"),
    ((0, 2), {}, gpuxfer.InvalidOptionError, "a world of 2 ranks needs an init_address"),
    ((0, 2, "http://host:1"), {}, gpuxfer.InvalidOptionError, "init_address='http://host:1'"),
    ((0, 1), {"device": -1}, gpuxfer.InvalidArgumentError, "CommunicatorOptions::device is -1"),
    ((0, 1), {"timeout": 0}, gpuxfer.InvalidArgumentError, "CommunicatorOptions::timeout is 0 ms"),
    ((0, 1), {"timeout": -2.5}, gpuxfer.InvalidArgumentError, "CommunicatorOptions::timeout is -2500 ms"),
    ((0, 1), {"timeout": datetime.timedelta(microseconds=10)}, gpuxfer.InvalidArgumentError, "is 0 ms"),
    ((0, 1), {"timeout": "soon"}, gpuxfer.InvalidArgumentError, "timeout: expected seconds"),
    ((0, 1), {"timeout": True}, gpuxfer.InvalidArgumentError, "timeout: expected seconds"),
    ((0, 1), {"timeout": float("nan")}, gpuxfer.InvalidArgumentError, "not a duration in range"),
]


@pytest.mark.parametrize("args, kwargs, cls, match", BAD_ARGUMENTS)
def test_bad_arguments_are_refused_before_cuda(environment, args, kwargs, cls, match):
    expect_error(cls, match, lambda: gpuxfer.Communicator(*args, **kwargs))


BAD_VARIABLES = [
    ({"GPUXFER_RANK": "0", "GPUXFER_WORLD_SIZE": "abc"}, "GPUXFER_WORLD_SIZE='abc'"),
    ({"GPUXFER_WORLD_SIZE": "2"}, "GPUXFER_WORLD_SIZE='2': set without GPUXFER_RANK"),
    ({"GPUXFER_RANK": "3", "GPUXFER_WORLD_SIZE": "2"}, "GPUXFER_RANK='3'.*out of range"),
    ({"GPUXFER_TIMEOUT": "soon"}, "GPUXFER_TIMEOUT='soon'"),
    ({"RANK": "0", "WORLD_SIZE": "two"}, "WORLD_SIZE='two'"),
]


@pytest.mark.parametrize("variables, match", BAD_VARIABLES)
def test_bad_variables_are_refused_before_cuda(environment, variables, match):
    for name, value in variables.items():
        environment.setenv(name, value)
    expect_error(gpuxfer.InvalidOptionError, match, gpuxfer.Communicator.from_environment)


def test_from_environment_checks_its_arguments(environment):
    expect_error(
        gpuxfer.InvalidArgumentError, "device is -1", lambda: gpuxfer.Communicator.from_environment(device=-1)
    )
    expect_error(
        gpuxfer.InvalidArgumentError,
        "timeout is 0 ms",
        lambda: gpuxfer.Communicator.from_environment(timeout=0),
    )
    expect_error(
        gpuxfer.InvalidArgumentError,
        "timeout: expected seconds",
        lambda: gpuxfer.Communicator.from_environment(timeout="1s"),
    )


@pytest.mark.parametrize(
    "rank, src, dst, send_bytes, recv_bytes, moved",
    [(0, 0, 1, 10, 0, 10), (1, 0, 1, 0, 7, 7), (2, 0, 1, 0, 0, 0), (1, 1, 1, 5, 5, 5), (0, 0, 0, 0, 0, 0)],
)
def test_copy_moves_sends_bytes_on_src_and_recvs_on_dst(rank, src, dst, send_bytes, recv_bytes, moved):
    assert gpuxfer._communicator._copy_bytes(rank, src, dst, send_bytes, recv_bytes) == moved


@pytest.mark.parametrize("send_bytes, recv_bytes", [(10, 9), (9, 10), (0, 1)])
def test_a_copy_from_a_rank_to_itself_refuses_sizes_that_differ(send_bytes, recv_bytes):
    """A smaller recv would be overrun (the C++ call takes one size), a larger one differs from a world
    of two, where NCCL would wait for its last bytes."""
    expect_error(
        gpuxfer.InvalidArgumentError,
        f"rank 1: copy from rank 1 to itself: send has {send_bytes} bytes, recv {recv_bytes}: they must agree",
        lambda: gpuxfer._communicator._copy_bytes(1, 1, 1, send_bytes, recv_bytes),
    )


class _Rank:
    """Communicator._ordered's view of a communicator, recording its synchronize calls (refused, as the
    C++ synchronize refuses, for a stream that captures)."""

    rank, world_size = 0, 1

    def __init__(self, calls, capturing=()):
        self.calls, self.capturing = calls, capturing

    def synchronize(self, stream):
        if stream in self.capturing:
            raise gpuxfer.UnsupportedError("synchronize cannot be captured into a CUDA graph")
        self.calls.append(("synchronize", stream))


_ARRAY = [(object(), gpuxfer._arrays.DeviceMemory(0xDEAD_0000, 16, None, None))]  # no interface stream


def _operation(calls):
    def operation(*args, stream, used):
        calls.append(("operation", args, stream, used))
        return "result"

    return operation


@pytest.mark.parametrize(
    "current, waited",
    [(None, None), (0, None), (1, None), (2, 2), (0x7F00, 0x7F00)],
    ids=["no framework", "default", "cudaStreamLegacy", "per-thread", "a stream"],
)
def test_without_stream_the_blocking_form_waits_for_another_current_stream(monkeypatch, current, waited):
    """The C++ blocking form (stream None) on every rank, whatever its current stream (the blocking and
    stream-ordered host operations exchange different steps); a current stream other than the legacy
    default one waited for first. A stream given is used as it is, nothing waited for."""
    module = gpuxfer._communicator
    monkeypatch.setattr(gpuxfer._streams, "current_stream_of", lambda tensor: current)
    calls = []
    result = module.Communicator._ordered(_Rank(calls), None, _ARRAY, _operation(calls), 1, 2, used="u")
    assert result == "result"
    assert calls == ([] if waited is None else [("synchronize", waited)]) + [("operation", (1, 2), None, "u")]
    calls.clear()
    module.Communicator._ordered(_Rank(calls), 5, _ARRAY, _operation(calls), used=None)
    assert calls == [("operation", (), 5, None)]


def test_without_stream_a_capturing_current_stream_is_refused(monkeypatch):
    module = gpuxfer._communicator
    monkeypatch.setattr(gpuxfer._streams, "current_stream_of", lambda tensor: 0x7F00)
    calls = []
    expect_error(
        gpuxfer.UnsupportedError,
        "without stream= is blocking and cannot be captured",
        lambda: module.Communicator._ordered(
            _Rank(calls, capturing=(0x7F00,)), None, _ARRAY, _operation(calls), used=None
        ),
    )
    assert calls == []


# --- Without a GPU ---------------------------------------------------------------------------------------

no_gpu = pytest.mark.skipif(DEVICE_COUNT > 0, reason="a CUDA device is present: these are the no-GPU paths")


@no_gpu
def test_creation_without_a_gpu_names_the_cuda_reason(environment):
    error = expect_error(gpuxfer.NoDeviceError, "no CUDA device", lambda: gpuxfer.Communicator(0, 1))
    assert error.message.startswith("rank 0 of 1: no CUDA device (cudaGetDeviceCount: ")
    assert str(error).startswith("gpuxfer no_device: ")
    expect_error(gpuxfer.NoDeviceError, "no CUDA device", gpuxfer.Communicator.from_environment)
    expect_error(
        gpuxfer.NoDeviceError, "no CUDA device", lambda: gpuxfer.Communicator.from_environment(timeout=5.0)
    )


@no_gpu
def test_without_a_gpu_no_rank_waits_for_the_others(environment):
    """The device is chosen before the rendezvous: rank 0 of 2 fails at once instead of listening."""
    expect_error(
        gpuxfer.NoDeviceError,
        "rank 0 of 2: no CUDA device",
        lambda: gpuxfer.Communicator(0, 2, "tcp://127.0.0.1:1", timeout=datetime.timedelta(seconds=1)),
    )
    environment.setenv("GPUXFER_RANK", "1")
    environment.setenv("GPUXFER_WORLD_SIZE", "2")
    environment.setenv("GPUXFER_INIT", "tcp://127.0.0.1:1")
    expect_error(gpuxfer.NoDeviceError, "rank 1 of 2: no CUDA device", gpuxfer.Communicator.from_environment)


# --- A world of one, in this process --------------------------------------------------------------------


@pytest.fixture(scope="module")
def comm1():
    """Rank 0 of 1 on CUDA device 0, shared by this module's tests (NCCL's creation is not free)."""
    needs_devices(1)
    return gpuxfer.Communicator(0, 1, timeout=60)


def test_a_world_of_one_says_what_it_is(comm1):
    assert (comm1.rank, comm1.world_size, comm1.device) == (0, 1, 0)
    assert comm1.timeout == datetime.timedelta(seconds=60)


@pytest.mark.parametrize("form", ["blocking", "stream"])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_world_of_one_runs_every_operation(comm1, lib, operation, form):
    stream = lib.stream(comm1.device) if form == "stream" else None
    OPERATIONS[operation](comm1, lib, stream)


@pytest.mark.parametrize("kind", ["bytes", "numpy", "torch"])
def test_broadcast_from_host_takes_every_kind_of_host_data(comm1, lib, kind):
    if kind == "torch":
        pytest.importorskip("torch")
    check_broadcast_from_host(comm1, lib, None, kind)
    check_broadcast_from_host(comm1, lib, lib.stream(comm1.device), kind)


def test_gather_to_host_of_nothing_gives_an_empty_array(comm1, lib):
    arrays = comm1.gather_to_host(lib.upload(comm1.device, np.zeros(0, np.uint8)), 0)
    assert len(arrays) == 1 and isinstance(arrays[0], gpuxfer.PinnedArray) and arrays[0].size == 0


def test_gather_to_host_results_outlive_the_communicator(lib):
    needs_devices(1)
    comm = gpuxfer.Communicator(0, 1, timeout=60)
    data = pattern(0, SIZE, 7)
    arrays = comm.gather_to_host(lib.upload(comm.device, data), 0)
    del comm
    gc.collect()
    np.testing.assert_array_equal(arrays[0], data)


def test_close_ends_the_communicator_and_every_later_call_says_so(lib):
    needs_devices(1)
    data = pattern(0, SIZE, 3)
    with gpuxfer.Communicator(0, 1, timeout=60) as comm:
        assert not comm.closed
        buf = lib.upload(comm.device, data)
        comm.broadcast(buf, 0)
    assert comm.closed
    assert (comm.rank, comm.world_size, comm.device) == (0, 1, 0)
    assert comm.timeout == datetime.timedelta(seconds=60)
    out = lib.poisoned(0, SIZE)
    stream = lib.stream(0)
    calls = {
        "broadcast": lambda: comm.broadcast(buf, 0),
        "broadcast, stream": lambda: comm.broadcast(buf, 0, stream=stream),
        "all_gather": lambda: comm.all_gather(buf, out),
        "gather": lambda: comm.gather(buf, out, 0, stream=stream),
        "copy": lambda: comm.copy(0, 0, buf, out),
        "gather_to_host": lambda: comm.gather_to_host(buf, 0),
        "broadcast_from_host": lambda: comm.broadcast_from_host(b"x", out, 0, stream=stream),
        "synchronize": lambda: comm.synchronize(stream),
    }
    for name, call in calls.items():
        try:
            expect_error(gpuxfer.InvalidArgumentError, "rank 0 of 1: the communicator is closed", call)
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from error
    comm.close()  # again: nothing
    assert comm._kept == 0, "a call refused after close kept its tensors"
    np.testing.assert_array_equal(lib.download(out), np.full(SIZE, POISON, np.uint8))
    np.testing.assert_array_equal(lib.download(buf), data)


def weak(tensor):
    """A weak reference to tensor; None for a framework whose arrays take none (the count alone says it)."""
    try:
        return weakref.ref(tensor)
    except TypeError:
        return None


def all_gather_behind_a_producer(comm, lib, seed):
    """An all_gather queued on a new stream behind a ~50 ms producer of its send tensor, which only the
    keep-alive holds on return (refcounting frees it at once but for that; no gc.collect: it may outlast
    the spin): (stream, recv, a weak reference to send)."""
    stream = lib.stream(comm.device)
    recv = lib.poisoned(comm.device, SIZE)
    send = produce(comm, lib, stream, pattern(0, SIZE, seed))
    sent = weak(send)
    comm.all_gather(send, recv, stream=stream)
    return stream, recv, sent


def test_close_waits_for_the_queued_operation_then_lets_go_of_its_tensors(lib):
    needs_devices(1)
    comm = gpuxfer.Communicator(0, 1, timeout=60)
    _, recv, sent = all_gather_behind_a_producer(comm, lib, 4)
    assert comm._kept >= 1, "nothing kept while the stream still runs the call"
    comm.close()  # no synchronize: close waits for the all_gather (the communicator's last operation)
    assert comm._kept == 0, "kept past close"
    gc.collect()
    assert sent is None or sent() is None, "close did not let go of the send tensor"
    np.testing.assert_array_equal(lib.download(recv), pattern(0, SIZE, 4))


def test_a_stream_ordered_call_keeps_its_tensors_until_the_stream_is_past_it(comm1, lib):
    stream, recv, sent = all_gather_behind_a_producer(comm1, lib, 8)
    assert comm1._kept >= 1, "nothing kept while the stream still runs the call"
    assert sent is None or sent() is not None, "the send tensor was dropped while the stream used it"
    comm1.synchronize(stream)
    gc.collect()
    assert comm1._kept == 0 and (sent is None or sent() is None), "kept past the stream"
    np.testing.assert_array_equal(lib.download(recv), pattern(0, SIZE, 8))


def test_broadcast_from_host_with_a_stream_keeps_its_recv(comm1, lib):
    """The recv a stream-ordered broadcast_from_host writes is kept until the stream is past the call, even
    when the caller drops it at once (the framework's allocator would hand its memory to other work)."""
    stream = lib.stream(comm1.device)
    recv = lib.poisoned(comm1.device, SIZE)
    lib.slow_copy_on(stream, recv, lib.poisoned(comm1.device, SIZE))  # holds the stream back ~50 ms
    received = weak(recv)
    comm1.broadcast_from_host(pattern(0, SIZE, 9), recv, 0, stream=stream)
    del recv
    assert comm1._kept >= 1, "nothing kept while the stream still runs the call"
    assert received is None or received() is not None, "the recv tensor was dropped while the stream wrote it"
    comm1.synchronize(stream)
    gc.collect()
    assert comm1._kept == 0, "kept past the stream"


def test_all_gather_captured_into_a_cuda_graph_replays_with_new_data(comm1, lib):
    if lib.name != "torch":
        pytest.skip("captured with torch.cuda.graph")
    torch = lib.torch
    device = f"cuda:{comm1.device}"
    send = torch.empty(SIZE, dtype=torch.uint8, device=device)
    recv = torch.full((SIZE + SLACK,), POISON, dtype=torch.uint8, device=device)
    out = recv[:SIZE]  # a capacity of SIZE exactly: the slack past it must stay poisoned
    # An earlier stream-ordered call whose keep-alive is still listed when the capture starts (nothing has
    # reaped it since): it must not be reaped during the capture, whose event queries would invalidate it.
    other = lib.stream(comm1.device)
    early_recv = lib.poisoned(comm1.device, SIZE)
    early_send = produce(comm1, lib, other, pattern(0, SIZE, 10))
    comm1.all_gather(early_send, early_recv, stream=other)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # torch's default: global capture mode, the strictest
        comm1.all_gather(send, out, stream=torch.cuda.current_stream())
    comm1.synchronize(other)
    np.testing.assert_array_equal(lib.download(early_recv), pattern(0, SIZE, 10), err_msg="the earlier call")
    for seed in (11, 12, 13):
        data = pattern(0, SIZE, seed)
        send.copy_(torch.from_numpy(data))
        graph.replay()
        torch.cuda.synchronize(device)
        got = recv.cpu().numpy()
        np.testing.assert_array_equal(got[:SIZE], data, err_msg=f"replay with seed {seed}")
        assert (got[SIZE:] == POISON).all(), "a replay wrote past the capacity"


def test_gather_refuses_capture(comm1, lib):
    if lib.name != "torch":
        pytest.skip("captured with torch.cuda.graph")
    torch = lib.torch
    device = f"cuda:{comm1.device}"
    send = torch.zeros(16, dtype=torch.uint8, device=device)
    recv = torch.zeros(16, dtype=torch.uint8, device=device)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(gpuxfer.UnsupportedError):
        with torch.cuda.graph(graph):
            comm1.gather(send, recv, 0, stream=torch.cuda.current_stream())


def test_without_stream_an_operation_starts_after_the_current_streams_work(comm1, lib):
    """As torch.distributed's operations: work queued on the framework's current stream (not the legacy
    default one) comes first, and the blocking call returns with the data in place. cupy's __dlpack__
    (called with no stream) makes the legacy default stream wait for cupy's current stream, so with cupy
    this passes on the old code too; with torch, whose __dlpack__ need not, it tells the two apart."""
    stream = lib.stream(comm1.device)
    gathered = lib.poisoned(comm1.device, SIZE)
    received = lib.poisoned(comm1.device, SIZE)
    send = produce(comm1, lib, stream, pattern(0, SIZE, 11))  # behind a ~50 ms spin on stream
    with lib.current(stream):
        comm1.all_gather(send, gathered)
    np.testing.assert_array_equal(lib.download(gathered), pattern(0, SIZE, 11), err_msg="all_gather")
    send = produce(comm1, lib, stream, pattern(0, SIZE, 12))
    with lib.current(stream):
        arrays = comm1.gather_to_host(send, 0)
    np.testing.assert_array_equal(arrays[0], pattern(0, SIZE, 12), err_msg="gather_to_host")
    copied = lib.poisoned(comm1.device, SIZE)
    send = produce(comm1, lib, stream, pattern(0, SIZE, 14))
    with lib.current(stream):
        comm1.copy(0, 0, send, copied)
    np.testing.assert_array_equal(lib.download(copied), pattern(0, SIZE, 14), err_msg="copy")
    # A slow write of poison queued on stream first: the broadcast's bytes must land after it.
    lib.slow_copy_on(stream, received, lib.poisoned(comm1.device, SIZE))
    with lib.current(stream):
        comm1.broadcast_from_host(pattern(0, SIZE, 13), received, 0)
    lib.synchronize(comm1.device)
    np.testing.assert_array_equal(lib.download(received), pattern(0, SIZE, 13), err_msg="from host")
    assert comm1._kept == 0, "a blocking call kept its tensors"


def test_without_stream_an_operation_refuses_a_capture(comm1, lib):
    if lib.name != "torch":
        pytest.skip("captured with torch.cuda.graph")
    torch = lib.torch
    buf = torch.zeros(16, dtype=torch.uint8, device=f"cuda:{comm1.device}")
    torch.cuda.synchronize(comm1.device)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(gpuxfer.UnsupportedError, match="without stream= is blocking"):
        with torch.cuda.graph(graph):
            comm1.broadcast(buf, 0)


def test_operations_check_their_arguments(comm1, lib):
    buf = lib.poisoned(comm1.device, 4096)
    host = np.zeros(8, np.uint8)
    expect_error(gpuxfer.InvalidArgumentError, "CUDA tensor", lambda: comm1.broadcast(host, 0))
    expect_error(gpuxfer.InvalidArgumentError, "root 1 is out of range", lambda: comm1.broadcast(buf, 1))
    expect_error(gpuxfer.InvalidArgumentError, "stream", lambda: comm1.broadcast(buf, 0, stream="default"))
    expect_error(gpuxfer.InvalidArgumentError, "stream is required", lambda: comm1.synchronize(None))
    small = lib.poisoned(comm1.device, 16)
    expect_error(gpuxfer.InvalidArgumentError, "recv holds", lambda: comm1.all_gather(buf, small))
    too_much = bytes(4097)
    expect_error(
        gpuxfer.InvalidArgumentError,
        "cannot take the root",
        lambda: comm1.broadcast_from_host(too_much, buf, 0)
    )
    with pytest.raises(TypeError):
        comm1.broadcast_from_host(object(), buf, 0)


# --- A world of two, under `gpuxfer launch -n 2` ---------------------------------------------------------


def gpuxfer_command() -> str | None:
    """The `gpuxfer` command: $GPUXFER_CLI, else the one of the CMake build whose package this is
    (PYTHONPATH=build/python: build/apps/gpuxfer), else one on PATH."""
    if os.environ.get("GPUXFER_CLI"):
        return os.environ["GPUXFER_CLI"]
    beside = pathlib.Path(gpuxfer.__file__).resolve().parents[2] / "apps" / "gpuxfer"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("gpuxfer")


def launch(arguments, variables):
    """`gpuxfer launch ARGUMENTS -- python comm_ranks.py ...`; skips without the command."""
    command = gpuxfer_command()
    if command is None:
        pytest.skip("no `gpuxfer` command: set GPUXFER_CLI, or test a CMake build (PYTHONPATH=build/python)")
    path = os.pathsep.join([str(HERE), *sys.path])
    env = dict(os.environ, PYTHONPATH=path, GPUXFER_TIMEOUT="60", **variables)
    ranks = HERE / "comm_ranks.py"
    with subprocess.Popen(
        [command, "launch", *arguments[:-1], "--", sys.executable, str(ranks), arguments[-1]],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    ) as run:
        try:
            output, _ = run.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            # SIGTERM, which the launcher passes on to every rank (each in a process group of its own, which
            # killing the launcher alone would leave running), then SIGKILL after its grace period.
            run.terminate()
            try:
                output, _ = run.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                run.kill()
                output, _ = run.communicate()
            pytest.fail(f"`gpuxfer launch` ran past 600 s and was stopped. Output:\n{output}")
    return run.returncode, output


@no_gpu
def test_under_gpuxfer_launch_each_rank_finds_its_place_and_names_the_missing_gpu(environment):
    code, output = launch(["-n", "2", "join"], {})
    assert code == 1, output
    assert re.search(r"^\[[01]\] .*gpuxfer no_device: rank [01] of 2: no CUDA device", output, re.M), output


@pytest.fixture
def two_devices():
    needs_devices(2)


NODES = {
    "one_node": ([], {}),
    # Each rank a node of its own over NCCL's network transport: the host operations' path between nodes.
    "node_per_rank": (
        ["--node-per-rank"],
        {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"},
    ),
}


@pytest.mark.parametrize("nodes", list(NODES))
def test_a_world_of_two_runs_every_operation(two_devices, lib, nodes):
    flags, variables = NODES[nodes]
    code, output = launch(["-n", "2", *flags, lib.name], variables)
    assert code == 0, output
    for rank in range(2):
        assert f"[{rank}] rank {rank} of 2: {2 * len(OPERATIONS)} checks passed" in output, output
