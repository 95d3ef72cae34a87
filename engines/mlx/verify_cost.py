"""What a verify costs on a CPU with a quantized body, measured at load on one of the model's own layers.

MLX's quantized product on a CPU costs about as much per row as a one-row product does (measured here:
3.3-4.4 times a one-row product for four rows), where a float product over four rows costs little more than
one. A verify of k tokens then costs nearly k plain steps, and drafting loses to drafter off.
"""

from __future__ import annotations

import statistics
import time

ROWS = 4  # a verify at block 4, the default block size
RUNS = 7  # per product: the median of these
LOSES_AT = 2.0  # a 4-row product this many times a one-row one: the drafts kept do not pay for the verify


def _median_time(layer, x) -> float:
    import mlx.core as mx

    mx.eval(layer(x))  # the first call pays for setting up the product
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        mx.eval(layer(x))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ratio(model) -> float | None:
    """The time of a ``ROWS``-row product over a one-row one, on the model's first quantized body layer; None
    when the model runs elsewhere than on the CPU or has no quantized layer."""
    import mlx.core as mx

    if mx.default_device() != mx.cpu:
        return None
    from .qwen35 import quantized_body_layer

    layer = quantized_body_layer(model)
    if layer is None:
        return None
    columns = layer.weight.shape[1] * 32 // layer.bits
    dtype = layer.scales.dtype
    one = mx.random.normal((1, 1, columns)).astype(dtype)
    rows = mx.random.normal((1, ROWS, columns)).astype(dtype)
    mx.eval(one, rows)
    return round(_median_time(layer, rows) / max(_median_time(layer, one), 1e-9), 2)


def slower_note(measured: float | None) -> str | None:
    """The sentence the engine adds to its drafter note for this ratio: None when drafting should still pay."""
    if measured is None or measured < LOSES_AT:
        return None
    return (f"Quantized products on this CPU: {ROWS} rows cost {measured:.1f}× one row, so a verify of "
            f"{ROWS} tokens costs about {measured:.1f} plain steps and drafting is likely slower here than "
            "drafter off (a float checkpoint, or a GPU, drafts faster).")


def quantized_verify(loaded) -> tuple[float | None, str | None]:
    """(ratio, a sentence when drafting is predicted to lose with it, else None)."""
    measured = ratio(loaded.model)
    return measured, (slower_note(measured) if loaded.drafter is not None else None)
