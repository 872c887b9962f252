"""stream= parsing: needs no GPU (only the handle is read)."""

from __future__ import annotations

import gpuxfer
import numpy as np
import pytest
from gpuxfer import stream_handle
from gpuxfer._arrays import DeviceMemory, _stream_of


class TorchLikeStream:  # torch.cuda.Stream carries .cuda_stream
    cuda_stream = 0x7F00_1000


class CupyLikeStream:  # cupy.cuda.Stream carries .ptr
    ptr = 0x7F00_2000


class ProtocolStream:  # the CUDA Python protocol: __cuda_stream__() -> (version, handle)
    def __cuda_stream__(self):
        return (0, 0x7F00_3000)


class BadProtocolStream:
    def __cuda_stream__(self):
        return 0x7F00_3000


@pytest.mark.parametrize(
    "stream, handle",
    [
        (None, 0),
        (0, 0),
        (1, 1),
        (2, 2),
        (0x7F00_0000, 0x7F00_0000),
        (TorchLikeStream(), 0x7F00_1000),
        (CupyLikeStream(), 0x7F00_2000),
        (ProtocolStream(), 0x7F00_3000),
    ],
)
def test_every_kind_of_stream_gives_its_handle(stream, handle):
    assert stream_handle(stream) == handle


class NumpyProtocolStream:  # a __cuda_stream__ whose handle is a numpy integer
    def __cuda_stream__(self):
        return (0, np.uint64(0x7F00_3000))


@pytest.mark.parametrize(
    "stream, handle",
    [
        (np.uint64(7), 7),
        (np.int64(7), 7),
        (np.uint64(2), 2),
        (np.uint64((1 << 64) - 1), (1 << 64) - 1),
        (NumpyProtocolStream(), 0x7F00_3000),
    ],
)
def test_numpy_integers_are_handles_as_in_a_cuda_array_interface(stream, handle):
    # operator.index, as __cuda_array_interface__'s stream is read (_arrays._stream_of)
    assert stream_handle(stream) == handle
    assert type(stream_handle(stream)) is int
    if isinstance(stream, np.integer):
        assert _stream_of({"stream": stream}) == handle


@pytest.mark.parametrize("stream", [np.int64(-1), np.bool_(True), np.float64(7.0), np.array([7], np.uint64)])
def test_numpy_values_that_are_no_handle_are_invalid_arguments(stream):
    with pytest.raises(gpuxfer.InvalidArgumentError, match="stream"):
        stream_handle(stream)


@pytest.mark.parametrize("stream", [-1, 1 << 64, True, "0", 1.5, object(), BadProtocolStream()])
def test_anything_else_is_an_invalid_argument(stream):
    with pytest.raises(gpuxfer.InvalidArgumentError, match="stream") as caught:
        stream_handle(stream)
    assert caught.value.code == "invalid_argument"


def test_real_streams_when_the_libraries_are_there():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device: no torch.cuda.Stream to make")
    s = torch.cuda.Stream()
    assert stream_handle(s) == s.cuda_stream != 0
    assert stream_handle(torch.cuda.default_stream()) == 0


def test_objects_of_no_known_framework_have_no_current_stream():
    from gpuxfer._streams import current_stream_of

    assert current_stream_of(object()) is None
    assert current_stream_of(TorchLikeStream()) is None


class HandleStream(TorchLikeStream):
    def __init__(self, handle):
        self.cuda_stream = handle


@pytest.mark.parametrize("handle, other", [(0, False), (1, False), (2, True), (0x7F00, True)])
def test_a_blocking_form_waits_for_a_current_stream_other_than_the_legacy_one(monkeypatch, handle, other):
    stream = HandleStream(handle)
    monkeypatch.setattr(gpuxfer._streams, "current_stream_of", lambda tensor: stream)
    assert gpuxfer._streams.other_current_stream(object()) is (stream if other else None)
    monkeypatch.setattr(gpuxfer._streams, "current_stream_of", lambda tensor: None)
    assert gpuxfer._streams.other_current_stream(object()) is None


def test_transfer_waits_for_each_framework_and_devices_current_stream_once(monkeypatch):
    """gather_slices' host waits: once per (framework, device), however many slices there are, each for
    the stream on its device."""
    streams = {"a": HandleStream(0x7F00), "b": HandleStream(0x7F01), "legacy": HandleStream(0)}
    monkeypatch.setattr(gpuxfer._streams, "current_stream_of", lambda tensor: streams[tensor])
    waits = []
    monkeypatch.setattr(gpuxfer._gpuxfer, "_wait_for_stream", lambda *args: waits.append(args))
    pairs = [(0, "a"), (0, "a"), (1, "b"), (2, "legacy"), (1, "b"), (None, "a")]
    arrays = [(tensor, DeviceMemory(0, 0, device, None)) for device, tensor in pairs]
    gpuxfer._streams.order_after_producers(arrays, None, "gather_slices")
    what = "gather_slices"
    assert waits == [(0x7F00, 0, what), (0x7F01, 1, what), (0x7F00, -1, what)]
