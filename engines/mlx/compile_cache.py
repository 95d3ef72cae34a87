"""Where MLX keeps the GPU kernels it compiles at run time, so that a second start finds them built.

MLX's CUDA backend compiles each fused kernel the first time a graph needs it and writes it to
``$MLX_PTX_CACHE_DIR`` (by default ``mlx/<version>/ptx`` in the system's temporary folder, which a reboot may
empty and another user may own). On an H100 the 4.1B rig's own-loop check and warm-up took 180 s with that folder
empty and 28 s with the kernels found there, so specchat points it at the user's cache folder, one subfolder per
MLX version and device, unless the user chose a folder. Elsewhere
(Metal, CPU) MLX reads no such variable and nothing changes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

VARIABLE = "MLX_PTX_CACHE_DIR"


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specchat" / "mlx-kernels"


def keep_compiled_kernels() -> str:
    """Point MLX's kernel cache at the user's cache folder, unless already chosen; returns the folder. Must run
    before the first compile of the process (MLX reads the variable once)."""
    if os.environ.get(VARIABLE):
        return os.environ[VARIABLE]
    import mlx.core as mx

    device = re.sub(r"[^A-Za-z0-9.]+", "-", str(mx.device_info().get("device_name") or "device")).strip("-")
    folder = cache_root() / f"mlx-{mx.__version__}-{device}"
    os.environ[VARIABLE] = str(folder)
    return str(folder)
