"""The few-row product kernel against MLX's own, on a CUDA GPU.

    python -m benchmarks.skinny

For weights of the 4.1B rig's shapes and each number of rows the kernel serves: microseconds per product (20 products queued, then
waited on, median of 30), the ratio, and the largest difference from MLX's result.
"""

from __future__ import annotations

import statistics
import time

SHAPES = {"attention/out (4096 x 4096)": (4096, 4096), "gate+up (16384 x 4096)": (16384, 4096),
          "down (4096 x 8192)": (4096, 8192), "LM head (14336 x 4096)": (14336, 4096)}


def main() -> None:
    import mlx.core as mx

    from engines.mlx.cuda.skinny import MAX_ROWS, applies, skinny

    def per_product(fn, xs, w) -> float:
        times = []
        for rep in range(33):
            start = time.perf_counter()
            mx.eval([fn(x, w) for x in xs])
            if rep >= 3:
                times.append((time.perf_counter() - start) / len(xs))
        return statistics.median(times) * 1e6

    print(f"{mx.default_device()}  mlx {mx.__version__}")
    for name, (n, k) in SHAPES.items():
        w = (mx.random.normal((n, k)) * k**-0.5).astype(mx.bfloat16)
        for rows in range(1, MAX_ROWS + 1):
            xs = [mx.random.normal((rows, k)).astype(mx.bfloat16) for _ in range(20)]
            mx.eval(w, xs)
            assert applies(xs[0], w)
            want, got = xs[0] @ w.T, skinny(xs[0], w)
            error = mx.abs(want.astype(mx.float32) - got.astype(mx.float32)).max().item()
            scale = mx.abs(want.astype(mx.float32)).max().item()
            ours = per_product(skinny, xs, w)
            theirs = per_product(lambda x, w: x @ w.T, xs, w)
            print(f"{name:30} rows {rows}: mlx {theirs:7.1f} us  skinny {ours:7.1f} us  "
                  f"x{theirs / ours:.2f}  max diff {error:.3g} (of {scale:.3g})")


if __name__ == "__main__":
    main()
