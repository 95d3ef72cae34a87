"""What a measurement ran on: machine and versions, for receipts and ``specchat bench``."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
from pathlib import Path

from ..blas import blas_library

PACKAGES = ("specchat", "mlx", "mlx-vlm")


def cpu_model() -> str:
    if sys.platform == "darwin":
        try:
            return subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                  timeout=5).stdout.strip() or platform.processor()
        except (OSError, subprocess.SubprocessError):
            return platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def accelerator() -> str | None:
    """The GPU MLX computes on by name ("Apple M4 Max", "NVIDIA H200"); None when MLX is missing or
    runs on the CPU (imported only here: ``import webapp`` stays light)."""
    if importlib.util.find_spec("mlx") is None:
        return None
    import mlx.core as mx

    device = mx.default_device()
    if device.type == mx.cpu:
        return None
    return str(mx.device_info(device).get("device_name") or device)


@functools.cache
def machine() -> dict:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "os": platform.platform(), "accelerator": accelerator(),
            "blas": blas_library()}


def versions() -> dict:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found
