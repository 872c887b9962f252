"""Shared fixtures of the Python tests: the device count, skips with their reason, torch and cupy.

Without a GPU every test that needs none runs and the others skip saying why; none passes silently.
"""

from __future__ import annotations

import gpuxfer
import pytest

from frameworks import FRAMEWORKS, load


def _devices() -> tuple[int, str]:
    manager = gpuxfer.Manager(min_devices=0)
    return manager.device_count, manager.device_status


DEVICE_COUNT, DEVICE_STATUS = _devices()


def needs_devices(n: int) -> None:
    """Skips the calling test, with the reason, when fewer than n CUDA devices are usable."""
    if DEVICE_COUNT < n:
        why = f" ({DEVICE_STATUS})" if DEVICE_STATUS else ""
        pytest.skip(f"needs {n} CUDA device{'s' if n > 1 else ''}, found {DEVICE_COUNT}{why}")


@pytest.fixture
def manager() -> gpuxfer.Manager:
    needs_devices(1)
    return gpuxfer.Manager()


@pytest.fixture
def manager2() -> gpuxfer.Manager:
    """A manager of two devices: two simulated ones on a machine with one GPU."""
    needs_devices(1)
    return gpuxfer.Manager(simulated_devices=2) if DEVICE_COUNT < 2 else gpuxfer.Manager()


@pytest.fixture(params=FRAMEWORKS)
def lib(request):
    """torch, then cupy: each test that takes it runs once per framework (skipped where one is missing)."""
    needs_devices(1)
    return load(request.param)
