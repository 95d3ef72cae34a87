"""Use a fast system BLAS under MLX on a Linux CPU.

The mlx-cpu wheel bundles netlib's reference BLAS: float32 matmuls run ~30×
slower than OpenBLAS, and a k-token speculative verify costs ~k× one token, so
drafting cannot pay. The dynamic loader binds BLAS symbols to the first
library that defines them, so preloading OpenBLAS before MLX loads makes MLX
use it. That has to happen at process start: the process re-executes itself
once with ``LD_PRELOAD`` set.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "SPECCHAT_BLAS"  # "bundled" keeps the wheel's BLAS; a path picks a library
CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib64/libopenblas.so.0",
    "/usr/lib/libopenblas.so.0",
)
# BLIS, for ``--blas PATH``: single-threaded (its default) it decodes small models faster than OpenBLAS here.
BLIS_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4",
    "/usr/lib/aarch64-linux-gnu/blis-pthread/libblis.so.4",
)


def blas_argument(text: str) -> str:
    """``--blas``: auto, bundled or a library file that exists (a mistyped path must not silently fall back)."""
    if text in ("auto", "bundled"):
        return text
    path = Path(text).expanduser()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text} is not a file: pass auto, bundled or the path of a BLAS library")
    return str(path)


def find_openblas(choice: str | None) -> str | None:
    """The library to preload, or None for the bundled BLAS."""
    if choice == "bundled" or not sys.platform.startswith("linux"):
        return None
    if choice and choice != "auto":
        return choice if Path(choice).is_file() else None
    return _installed(CANDIDATES)


def ensure_fast_blas(choice: str | None, argv: list[str], module: str = "webapp") -> None:
    """Re-exec ``python -m module argv`` with OpenBLAS preloaded when one is found and not yet loaded."""
    choice = choice or os.environ.get(ENV) or "auto"
    library = find_openblas(choice)
    preloaded = os.environ.get("LD_PRELOAD", "")
    if library is None or library in preloaded.split(":"):
        return
    env = dict(os.environ, LD_PRELOAD=":".join(p for p in (library, preloaded) if p), **{ENV: library})
    os.execve(sys.executable, [sys.executable, "-m", module, *argv], env)


def find_blis() -> str | None:
    return _installed(BLIS_CANDIDATES)


def _installed(candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if Path(c).is_file()), None)


def blas_library() -> str:
    """Which BLAS this process mapped, in a few words (for receipts and the start-up log)."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "the platform's BLAS (Accelerate on macOS)" if sys.platform == "darwin" else "unknown"
    return blas_in_maps(maps)


# A BLAS library file by its name: not cuBLAS, nor a Python extension with "blas" in its name.
_BLAS_FILE = re.compile(r"^lib(?:openblas|blas|blis)[^/]*\.so")


def _usable_by_mlx(path: str) -> bool:
    """A BLAS library MLX can bind to: not one another wheel vendors (``numpy.libs/``, ``scipy.libs/``:
    loaded privately, with renamed symbols), only the system's or mlx's own."""
    folder, _, name = path.rpartition("/")
    vendored = folder.endswith(".libs") and not folder.rpartition("/")[2].startswith("mlx")
    return bool(_BLAS_FILE.match(name)) and not vendored


def blas_in_maps(maps: str) -> str:
    """``blas_library`` from the text of a process's memory map."""
    libs = sorted({path for path in (line.split()[-1] for line in maps.splitlines() if "/" in line)
                   if _usable_by_mlx(path)})
    fast = [lib for lib in libs if "openblas" in lib.lower()]
    if fast:
        return f"OpenBLAS ({fast[0]})"
    blis = [lib for lib in libs if "libblis" in lib]
    if blis:
        return f"BLIS ({blis[0]}, {_blis_threads()} thread(s))"
    return f"the mlx wheel's bundled reference BLAS ({', '.join(libs) or 'none mapped yet'})"


def _blis_threads() -> str:
    return os.environ.get("BLIS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "1"


def blas_in_use() -> str:
    """``blas_library`` with what to do about it, for the start-up log."""
    library = blas_library()
    if library.startswith(("OpenBLAS", "BLIS")):
        return f"{library}; set {ENV}=bundled or pass --blas bundled to turn it off"
    if library.startswith("the mlx wheel"):
        return f"{library}; install OpenBLAS (Debian/Ubuntu: libopenblas0-pthread) for a faster CPU"
    return library
