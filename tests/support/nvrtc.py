"""specchat's CUDA kernels compiled without a GPU: NVIDIA's runtime compiler (the ``nvidia-cuda-nvrtc`` wheel of
CUDA 13, the compiler mlx-cuda-13 runs them through) on a source wrapped as ``mx.fast.cuda_kernel`` wraps it.

MLX's own device header is not in any wheel this project installs; ``PRELUDE`` stands in for the two things the
kernels take from it (the 16-bit float types and the ``Shape`` of an input), so a kernel that compiles here
compiles there as far as its own code goes."""

from __future__ import annotations

import ctypes
import importlib.util
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PRELUDE = """
#include <cuda_bf16.h>
#include <cuda_fp16.h>
typedef unsigned int uint32_t;
struct Shape {
    int d[8];
    __device__ int operator[](int i) const { return d[i]; }
};
"""

CUDA_TYPES = {"bfloat16": "__nv_bfloat16", "float16": "__half", "float32": "float", "uint32": "uint32_t"}


@lru_cache(maxsize=1)
def _cuda_dir() -> Path | None:
    """The folder of the CUDA 13 wheels (``nvidia/cu13``): the compiler's library and the headers."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except ModuleNotFoundError:
        return None
    for root in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(root) / "cu13"
        if (folder / "lib" / "libnvrtc.so.13").exists() and (folder / "include" / "cuda_bf16.h").exists():
            return folder
    return None


def available() -> bool:
    """Whether the compiler and the CUDA headers are installed (the test extra installs both on Linux x86-64)."""
    return _cuda_dir() is not None


@lru_cache(maxsize=1)
def _library():
    return ctypes.CDLL(str(_cuda_dir() / "lib" / "libnvrtc.so.13"))


@dataclass(frozen=True)
class Compiled:
    ok: bool
    log: str

    @property
    def registers(self) -> int:
        return int(re.search(r"Used (\d+) registers", self.log).group(1))

    @property
    def spilled_bytes(self) -> int:
        return sum(int(n) for n in re.findall(r"(\d+) bytes spill (?:stores|loads)", self.log))

    @property
    def warnings(self) -> list[str]:
        return [line for line in self.log.splitlines() if "warning" in line.lower()]


def wrap(source: str, inputs: dict[str, str], outputs: dict[str, str], template: dict, header: str = "") -> str:
    """The source as ``mx.fast.cuda_kernel`` builds it: the header, then a kernel whose parameters are the inputs
    (each with its ``_shape`` where the source reads one) and the outputs, the template as constants and types."""
    params = []
    for name, dtype in inputs.items():
        params.append(f"const {CUDA_TYPES[dtype]}* {name}")
        if f"{name}_shape" in source:
            params.append(f"const __grid_constant__ Shape {name}_shape")
    params += [f"{CUDA_TYPES[dtype]}* {name}" for name, dtype in outputs.items()]
    constants = "".join(f"  using {name} = {CUDA_TYPES[value]};\n" if isinstance(value, str)
                        else f"  constexpr int {name} = {int(value)};\n" for name, value in template.items())
    return (PRELUDE + header + "namespace specchat {\n__global__ void kernel(" + ", ".join(params) + ") {\n"
            + constants + source + "\n}\n}\n")


def compile_for(source: str, arch: str = "sm_90") -> Compiled:
    """Compile to the GPU's own code for ``arch``, with ptxas reporting registers and spills."""
    lib = _library()
    program = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(program), source.encode(), b"kernel.cu", 0, None, None) == 0
    include = _cuda_dir() / "include"
    options = [f"--gpu-architecture={arch}".encode(), b"-std=c++17", b"-default-device", f"-I{include}".encode(),
               b"--ptxas-options=-v"]
    try:
        result = lib.nvrtcCompileProgram(program, len(options), (ctypes.c_char_p * len(options))(*options))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))
    return Compiled(result == 0, log.value.decode(errors="replace"))
