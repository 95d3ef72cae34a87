"""specchat's own CUDA kernels, which run only where MLX runs on an NVIDIA GPU: few-row products (``skinny``,
``quantized_skinny``, ``quantized_mma``) and the gated-delta recurrence with its states (``recurrence``).

Every kernel's module says where it applies (``applies``); which of the product kernels a model's layers run is
a ``KernelChoice``, fixed when the own loop copies the model's parts at load (the seam, qwen35.py). The engine
loads with the default; a benchmark that measures another passes its own (``specchat bench --cuda-kernels``,
``benchmarks.rounds --no-kernel`` or ``--cuda-cores``), which reaches the parts as an argument.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelChoice:
    """Which of specchat's product kernels run on CUDA (elsewhere none does, whatever the choice)."""

    # bfloat16 products over 2-5 rows and quantized ones over 1-16 run specchat's kernels, not MLX's products
    few_rows: bool = True
    # 4- and 8-bit products over 1-16 rows with bfloat16 or float16 activations on tensor cores (quantized_mma.py),
    # where four rows cost what one does; other bit widths and float32 on the CUDA-core kernel. One choice for
    # every row count, so identity holds either way (benchmarks.rounds --cuda-cores measures the other)
    tensor_cores: bool = True


def use_cuda_kernel() -> bool:
    """MLX runs on a CUDA GPU here, where specchat's own kernels apply."""
    import mlx.core as mx

    return mx.default_device() == mx.gpu and mx.cuda.is_available()
