"""Weights stored at fewer bytes than the checkpoint computes in, widened once at load.

A checkpoint may keep its weights as float16 to stay small on disk (and in a
repository that keeps every version) while its config declares float32, the
dtype it was trained and checked in. mlx-vlm keeps weights in their stored dtype,
so without this such a model would compute in float16 (on a CPU, without BLAS).
"""

from __future__ import annotations


def declared_dtype(config: dict) -> str | None:
    """The dtype a config declares for the model's maths (``dtype`` or ``torch_dtype``, text config first)."""
    for section in (config.get("text_config") or {}, config):
        for key in ("dtype", "torch_dtype"):
            if isinstance(section.get(key), str):
                return section[key]
    return None


def widen_to_declared(module, config: dict) -> bool:
    """Cast ``module``'s float16 and bfloat16 parameters to float32 when ``config`` declares float32.

    Returns whether anything was cast. A config that declares another dtype, or none, leaves the module
    as loaded (a real bfloat16 checkpoint computes in bfloat16; quantized weights stay quantized).
    """
    if declared_dtype(config) != "float32":
        return False
    import mlx.core as mx
    from mlx.utils import tree_flatten

    narrow = (mx.float16, mx.bfloat16)
    if not any(value.dtype in narrow for _, value in tree_flatten(module.parameters())):
        return False
    module.set_dtype(mx.float32, predicate=lambda dtype: dtype in narrow)
    return True
