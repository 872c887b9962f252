"""The README's Python example is apps/examples/seed_example.py verbatim, and it runs (with a GPU)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from conftest import DEVICE_COUNT, needs_devices

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "apps/examples/seed_example.py"


def test_the_readme_shows_the_example_verbatim():
    readme = (ROOT / "README.md").read_text()
    marker = "<!-- example: apps/examples/seed_example.py -->\n```python\n"
    assert marker in readme, "README.md lost the Python example's marker"
    block = readme.split(marker, 1)[1].split("```\n", 1)[0]
    assert (
        block == EXAMPLE.read_text()
    ), "README.md's Python example differs from apps/examples/seed_example.py"


def test_the_example_runs():
    """Its whole output: a line per source device (every device but the destination 0, each with its
    4 MiB right) and the count. On one GPU that is the count alone, 0: a gather to the only device reads
    nothing, and any other line or count fails."""
    needs_devices(1)
    pytest.importorskip("torch")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    run = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    sources = range(1, DEVICE_COUNT)
    expected = [f"device {d}: {4 << 20} bytes ok" for d in sources] + [
        f"gathered {len(sources)} buffers to the host"
    ]
    assert run.stdout.splitlines() == expected, run.stdout + run.stderr
