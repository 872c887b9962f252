"""torch and cupy behind one small interface, so every GPU test runs with both; plus the byte pattern."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

FRAMEWORKS = ["torch", "cupy"]


_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment: odd, so that word k -> k * _GOLDEN is one to one
_MIX_WORDS = 1 << 20  # words hashed at a time: the temporaries stay small (8 MiB) for any size


def _mix(z: int) -> int:
    """splitmix64's finaliser on a Python int (no numpy scalar, which warns on the wraparound)."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _mix_words(z: np.ndarray, scratch: np.ndarray) -> None:
    """_mix on every uint64 of z, in place (numpy's array arithmetic wraps around without a warning)."""
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None)):
        np.right_shift(z, np.uint64(shift), out=scratch)
        z ^= scratch
        if factor is not None:
            z *= np.uint64(factor)


def pattern(device: int, nbytes: int, seed: int = 1) -> np.ndarray:
    """nbytes bytes that depend on the device, the offset and the seed: byte o is byte o % 8 (little
    endian) of a splitmix64 hash of (seed, device, o // 8): no period, and unrelated bytes for any other
    (device, seed) at any offset (a linear pattern mod 251 repeated every 64,256 bytes, and gave
    pattern(0, n, 1) == pattern(1, n, 33)). Vectorised in chunks: ten numpy passes over the words."""
    key = np.uint64(_mix(_mix((seed + _GOLDEN) & _MASK) ^ (((device + 1) * _GOLDEN) & _MASK)))
    words = np.empty((nbytes + 7) // 8, dtype="<u8")
    steps = np.arange(1, min(words.size, _MIX_WORDS) + 1, dtype=np.uint64) * np.uint64(_GOLDEN)
    scratch = np.empty_like(steps)
    for start in range(0, words.size, _MIX_WORDS):
        chunk = words[start : start + _MIX_WORDS]
        # word k's input, (k + 1) * _GOLDEN: the first chunk's plus start * _GOLDEN
        np.add(steps[: chunk.size], np.uint64((start * _GOLDEN) & _MASK), out=chunk)
        chunk ^= key
        _mix_words(chunk, scratch[: chunk.size])
    return words.view(np.uint8)[:nbytes]


def written_late(lib: Any, ordinal: int, nbytes: int, seed: int) -> tuple[Any, np.ndarray, Any]:
    """(stream, data, tensor): a poisoned tensor on device ordinal that a copy of pattern(0, nbytes, seed),
    queued on a new stream behind a ~50 ms spin, overwrites: a reader that does not wait for the stream
    sees poison."""
    stream = lib.stream(ordinal)
    data = pattern(0, nbytes, seed)
    source = lib.upload(ordinal, data)
    tensor = lib.poisoned(ordinal, nbytes)
    lib.synchronize()
    lib.slow_copy_on(stream, tensor, source)
    return stream, data, tensor


POISON = 0xA5
SPIN_CYCLES = 100_000_000  # about 50 ms of one spinning GPU thread: longer than any copy these tests make

_SPIN_SOURCE = r"""
extern "C" __global__ void gpuxfer_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
"""


class Torch:
    name = "torch"

    def __init__(self) -> None:
        self.torch = importlib.import_module("torch")
        self.held: list[Any] = []  # sources of queued copies: freed now, the allocator would hand them out

    def upload(self, ordinal: int, host: np.ndarray) -> Any:
        return self.torch.from_numpy(host.copy()).to(f"cuda:{ordinal}")

    def poisoned(self, ordinal: int, nbytes: int) -> Any:
        return self.torch.full((nbytes,), POISON, dtype=self.torch.uint8, device=f"cuda:{ordinal}")

    def download(self, tensor: Any) -> np.ndarray:
        return tensor.cpu().numpy()

    def pointer(self, tensor: Any) -> int:
        return tensor.data_ptr()

    def stream(self, ordinal: int) -> Any:
        return self.torch.cuda.Stream(device=f"cuda:{ordinal}")

    def write_on(self, stream: Any, tensor: Any, host: np.ndarray) -> None:
        """Writes host into tensor on stream behind a ~50 ms spin (slow_copy_on from a device copy made
        and waited for first): a reader that does not wait for stream sees tensor as it was."""
        ordinal = tensor.device.index
        source = self.upload(ordinal, host)
        self.synchronize(ordinal)
        self.slow_copy_on(stream, tensor, source)

    def current(self, stream: Any) -> Any:
        """A context in which stream is torch's current stream."""
        return self.torch.cuda.stream(stream)

    def slow_copy_on(self, stream: Any, dst: Any, src: Any) -> None:
        """Queues on stream a spin, then dst <- src (device tensors): a reader that does not wait for
        stream sees dst as it was."""
        with self.torch.cuda.stream(stream):
            self.torch.cuda._sleep(SPIN_CYCLES)
        self.copy_on(stream, dst, src)

    def copy_on(self, stream: Any, dst: Any, src: Any) -> None:
        """dst <- src (device tensors) by stream's next work; src is held until this object dies."""
        self.held.append(src)
        with self.torch.cuda.stream(stream):
            dst.copy_(src, non_blocking=True)

    def clone_on(self, stream: Any, tensor: Any) -> Any:
        """A copy of tensor made by stream's next work."""
        with self.torch.cuda.stream(stream):
            return tensor.clone()

    def to_device_on(self, stream: Any, ordinal: int, host: np.ndarray) -> Any:
        """host copied to device ordinal by stream's next work."""
        with self.torch.cuda.stream(stream):
            return self.torch.from_numpy(host).to(f"cuda:{ordinal}", non_blocking=True)

    def busy(self, stream: Any) -> bool:
        """Whether stream still has work to do (a non-blocking query)."""
        return not stream.query()

    def synchronize(self, ordinal: int | None = None) -> None:
        """Waits for the work queued on device ordinal, or on every device."""
        for d in range(self.torch.cuda.device_count()) if ordinal is None else [ordinal]:
            self.torch.cuda.synchronize(d)


class Cupy:
    name = "cupy"

    def __init__(self) -> None:
        self.cupy = importlib.import_module("cupy")
        self.held: list[Any] = []  # as Torch.held

    def upload(self, ordinal: int, host: np.ndarray) -> Any:
        with self.cupy.cuda.Device(ordinal):
            return self.cupy.asarray(host)

    def poisoned(self, ordinal: int, nbytes: int) -> Any:
        with self.cupy.cuda.Device(ordinal):
            return self.cupy.full((nbytes,), POISON, dtype=self.cupy.uint8)

    def download(self, tensor: Any) -> np.ndarray:
        return self.cupy.asnumpy(tensor)

    def pointer(self, tensor: Any) -> int:
        return tensor.data.ptr

    def stream(self, ordinal: int) -> Any:
        with self.cupy.cuda.Device(ordinal):
            return self.cupy.cuda.Stream(non_blocking=True)

    def write_on(self, stream: Any, tensor: Any, host: np.ndarray) -> None:
        """As Torch.write_on: a spin of SPIN_CYCLES (slow_copy_on), then a device-to-device copy."""
        ordinal = tensor.device.id
        source = self.upload(ordinal, host)
        self.synchronize(ordinal)
        self.slow_copy_on(stream, tensor, source)

    def current(self, stream: Any) -> Any:
        """A context in which stream is cupy's current stream (of the current device)."""
        return stream

    def slow_copy_on(self, stream: Any, dst: Any, src: Any) -> None:
        """Queues on stream a spin kernel, then dst <- src (device arrays)."""
        with self.cupy.cuda.Device(dst.device.id), stream:
            spin = self.cupy.RawKernel(_SPIN_SOURCE, "gpuxfer_spin")
            spin((1,), (1,), (np.int64(SPIN_CYCLES),))
        self.copy_on(stream, dst, src)

    def copy_on(self, stream: Any, dst: Any, src: Any) -> None:
        self.held.append(src)
        with self.cupy.cuda.Device(dst.device.id), stream:
            self.cupy.copyto(dst, src)

    def clone_on(self, stream: Any, tensor: Any) -> Any:
        with self.cupy.cuda.Device(tensor.device.id), stream:
            return tensor.copy()

    def to_device_on(self, stream: Any, ordinal: int, host: np.ndarray) -> Any:
        with self.cupy.cuda.Device(ordinal):
            out = self.cupy.empty(host.shape, dtype=host.dtype)
            out.set(host, stream=stream)
            return out

    def busy(self, stream: Any) -> bool:
        return not stream.done

    def synchronize(self, ordinal: int | None = None) -> None:
        for d in range(self.cupy.cuda.runtime.getDeviceCount()) if ordinal is None else [ordinal]:
            with self.cupy.cuda.Device(d):
                self.cupy.cuda.Device(d).synchronize()


def load(name: str) -> Any:
    try:
        return {"torch": Torch, "cupy": Cupy}[name]()
    except ImportError as error:
        pytest.skip(f"{name} is not installed: {error}")
