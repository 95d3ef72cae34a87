"""float32 products at full float32 precision, so that a verify computes what a one-row step does.

MLX runs float32 matrix products as TF32 (ten bits of mantissa) where the hardware has it, on an NVIDIA GPU and
on Apple's M5 (there only its general products over two rows or more; a one-row product stays float32), unless
``MLX_ENABLE_TF32=0``. A float32 checkpoint's k-row verify would then round about 1e-3 of a logit away from its
one-row step instead of about 1e-7, and greedy output with the drafter would part from drafter off at a near-tie
far more often. bfloat16, float16 and quantized checkpoints are not affected. MLX reads the variable when it
first sets up that product, so it is set at process start, before MLX is imported; a value the user set stands.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

VARIABLE = "MLX_ENABLE_TF32"


def keep_float32_exact(environ: MutableMapping[str, str] = os.environ) -> None:
    """Turn MLX's TF32 products off unless the environment already says what it wants."""
    environ.setdefault(VARIABLE, "0")


def float32_products(environ: MutableMapping[str, str] = os.environ) -> str:
    """How MLX computes float32 products in this process, in words for the log."""
    if environ.get(VARIABLE, "1") == "0":
        return f"full float32 ({VARIABLE}=0)"
    return f"TF32 where the hardware has it ({VARIABLE}={environ.get(VARIABLE, 'unset')})"
