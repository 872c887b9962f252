"""gpuxfer in one process with torch and with cupy, imported in either order.

Each case runs in its own interpreter so that a crash fails the case instead of ending pytest. These
crashed on the GPU runner until libgpuxfer exported gpuxfer's symbols alone (src/gpuxfer.map): built
there, the library carried copies of parts of libstdc++, and torch's and cupy's C++ runtime calls bound
to them (a segfault in Manager(), an abort in torch's import).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

# Gathers one 1 MiB buffer per device (when there are devices) and checks every byte.
GATHER = """
manager = gpuxfer.Manager(min_devices=0)
transfer = gpuxfer.Transfer(manager)
for i, info in enumerate(manager.devices):
    transfer.set_device_buffer(i, upload(info.ordinal, bytes((k * 7 + i) % 251 for k in range(1 << 20))))
for i, array in enumerate(transfer.gather_all()):
    assert bytes(array) == bytes((k * 7 + i) % 251 for k in range(1 << 20)), f"device {i}: wrong bytes"
print("ok", manager.device_count)
"""

TORCH_UPLOAD = """
def upload(ordinal, data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).to(f"cuda:{ordinal}")
"""

CUPY_UPLOAD = """
def upload(ordinal, data):
    with cupy.cuda.Device(ordinal):
        return cupy.asarray(numpy.frombuffer(data, dtype=numpy.uint8))
"""

CASES = {
    "torch_then_gpuxfer": ("torch", "import torch\nimport gpuxfer\n" + TORCH_UPLOAD + GATHER),
    "gpuxfer_then_torch": (
        "torch",
        "import gpuxfer\nimport torch\n"
        + TORCH_UPLOAD
        + GATHER
        + "if torch.cuda.is_available():\n    assert torch.ones(4, device='cuda').sum().item() == 4\n",
    ),
    "cupy_then_gpuxfer": ("cupy", "import numpy\nimport cupy\nimport gpuxfer\n" + CUPY_UPLOAD + GATHER),
    "gpuxfer_then_cupy": ("cupy", "import numpy\nimport gpuxfer\nimport cupy\n" + CUPY_UPLOAD + GATHER),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_gpuxfer_lives_beside_the_framework(case):
    framework, source = CASES[case]
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")
    result = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(source)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert result.returncode == 0, (
        f"{case}: exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr[-4000:]}"
    )
    assert result.stdout.startswith("ok"), result.stdout
