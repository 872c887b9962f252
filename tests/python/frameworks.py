"""torch and cupy behind one small interface, so every GPU test runs with both; plus the byte pattern."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

FRAMEWORKS = ["torch", "cupy"]


def pattern(device: int, nbytes: int, seed: int = 1) -> np.ndarray:
    """Bytes that depend on the device, the offset and the seed (never zeros all over)."""
    offsets = np.arange(nbytes, dtype=np.uint64)
    return ((offsets * 7 + (offsets >> np.uint64(8)) * 13 + device * 31 + seed * 101) % 251 + 1).astype(
        np.uint8
    )


POISON = 0xA5


class Torch:
    name = "torch"

    def __init__(self) -> None:
        self.torch = importlib.import_module("torch")

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
        """Writes host into tensor on stream, after a spin so that a reader that does not wait sees poison."""
        source = self.torch.from_numpy(host.copy()).pin_memory()
        with self.torch.cuda.stream(stream):
            self.torch.cuda._sleep(50_000_000)
            tensor.copy_(source, non_blocking=True)

    def current(self, stream: Any) -> Any:
        """A context in which stream is torch's current stream."""
        return self.torch.cuda.stream(stream)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()


class Cupy:
    name = "cupy"

    def __init__(self) -> None:
        self.cupy = importlib.import_module("cupy")

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
        with self.cupy.cuda.Device(tensor.device.id), stream:
            spin = self.cupy.zeros(1 << 22, dtype=self.cupy.float32)
            for _ in range(20):  # a few ms of work queued before the write
                spin = self.cupy.sin(spin) + 1
            tensor.set(host, stream=stream)

    def current(self, stream: Any) -> Any:
        """A context in which stream is cupy's current stream (of the current device)."""
        return stream

    def synchronize(self) -> None:
        for d in range(self.cupy.cuda.runtime.getDeviceCount()):
            with self.cupy.cuda.Device(d):
                self.cupy.cuda.Device(d).synchronize()


def load(name: str) -> Any:
    try:
        return {"torch": Torch, "cupy": Cupy}[name]()
    except ImportError as error:
        pytest.skip(f"{name} is not installed: {error}")
