"""The ``stream=`` argument: a CUDA stream handle from whatever the caller has."""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable, Iterable
from typing import Any

from . import _gpuxfer
from ._errors import InvalidArgumentError


def stream_handle(stream: Any) -> int:
    """The ``cudaStream_t`` value of ``stream`` as an int.

    Accepted: ``None`` (the legacy default stream, 0), an int handle (0 = legacy default, 1 =
    ``cudaStreamLegacy``, 2 = ``cudaStreamPerThread``; any integer ``operator.index`` takes, such as
    ``np.uint64``, as a ``__cuda_array_interface__``'s stream is read), an object with ``__cuda_stream__``
    (the CUDA Python protocol: a method or attribute giving ``(version, handle)``), a ``torch.cuda.Stream``
    (``.cuda_stream``) or a ``cupy.cuda.Stream`` (``.ptr``). Reading the handle touches no GPU.

    >>> gpuxfer.stream_handle(torch.cuda.current_stream())
    0
    """
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise InvalidArgumentError(f"stream: expected a CUDA stream, got {stream!r}")
    if isinstance(stream, int) or hasattr(type(stream), "__index__"):
        return _checked(stream, "an int")
    protocol = getattr(stream, "__cuda_stream__", None)
    if protocol is not None:
        value = protocol() if callable(protocol) else protocol
        if not (isinstance(value, tuple) and len(value) == 2):
            raise InvalidArgumentError(f"stream: __cuda_stream__ gave {value!r}, expected (version, handle)")
        return _checked(value[1], "__cuda_stream__")
    for attribute in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return _checked(value, f".{attribute}")
    raise InvalidArgumentError(
        f"stream: expected None, an int, a torch.cuda.Stream, a cupy.cuda.Stream or an object with "
        f"__cuda_stream__, got {type(stream).__name__}"
    )


def _checked(handle: Any, source: str) -> int:
    try:
        value = -1 if isinstance(handle, bool) else operator.index(handle)
    except TypeError:
        value = -1
    if not 0 <= value < 1 << 64:
        raise InvalidArgumentError(f"stream: {source} gave {handle!r}, not a stream handle")
    return value


LEGACY_STREAMS = (0, 1)  # 0 and cudaStreamLegacy: the stream the C++ blocking forms start after


def other_current_stream(tensor: Any) -> Any:
    """The current stream of ``tensor``'s framework on its device (``current_stream_of``) when it is not
    the legacy default stream: the one a blocking form must wait for besides it, as torch.distributed's
    operations do; None otherwise."""
    current = current_stream_of(tensor)
    return None if current is None or stream_handle(current) in LEGACY_STREAMS else current


def current_stream_of(tensor: Any) -> Any:
    """The current stream object of the framework that made ``tensor`` on its device (torch, cupy), where
    the producer most likely queued its work; None for other objects."""
    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    if torch is not None and isinstance(tensor, torch.Tensor):  # subclasses too
        return torch.cuda.current_stream(tensor.device)
    if cupy is not None and isinstance(tensor, cupy.ndarray):
        with tensor.device:
            return cupy.cuda.get_current_stream()
    return None


HostWait = Callable[[int, int, str], None]  # (stream handle, CUDA ordinal or -1, operation name)


def order_after_producers(
    arrays: Iterable[tuple[Any, Any]], stream: Any, what: str, host_wait: HostWait | None = None
) -> None:
    """Orders a call that touches device ``arrays`` ((tensor, ``DeviceMemory``) pairs; a None tensor is
    skipped) after the work their producers queued, each stream once:

    - ``stream`` None, a blocking form (which the C++ orders after the legacy default stream): a host wait,
      ``host_wait(handle, ordinal, what)`` (by default ``_gpuxfer._wait_for_stream``: GIL released,
      ``UnsupportedError`` while the stream captures), for each array's framework's current stream on its
      device where that is another stream (``other_current_stream``; once per framework and device), and
      for each stream a ``__cuda_array_interface__`` names other than the legacy default one;
    - ``stream`` given, a stream-ordered form: ``stream`` waits on the GPU (``_gpuxfer._stream_wait``: an
      event, no host wait; nothing while ``stream`` captures) for each stream a
      ``__cuda_array_interface__`` names. Not for the framework's current stream: ``stream=`` is where the
      caller says its work is.
    """
    target = None if stream is None else stream_handle(stream)
    frameworks = set()
    waits: dict[tuple[int, int], None] = {}  # insertion-ordered, each once
    for tensor, memory in arrays:
        if tensor is None:
            continue
        ordinal = -1 if memory.device_id is None else memory.device_id
        if target is None and (type(tensor), memory.device_id) not in frameworks:
            frameworks.add((type(tensor), memory.device_id))
            current = other_current_stream(tensor)
            if current is not None:
                waits[(stream_handle(current), ordinal)] = None
        if memory.stream is not None and not _same_stream(memory.stream, 0 if target is None else target):
            waits[(memory.stream, ordinal)] = None
    for handle, ordinal in waits:
        if target is not None:
            _gpuxfer._stream_wait(target, handle, ordinal, what)
        elif host_wait is not None:
            host_wait(handle, ordinal, what)
        else:
            _gpuxfer._wait_for_stream(handle, ordinal, what)


def _same_stream(a: int, b: int) -> bool:
    return a == b or (a in LEGACY_STREAMS and b in LEGACY_STREAMS)
