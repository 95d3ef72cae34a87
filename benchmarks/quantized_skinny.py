"""The few-row quantized product kernel against MLX's own quantized product, on a CUDA GPU.

    python -m benchmarks.quantized_skinny [--bits 4,8] [--group-size 64] [--rows 1,2,4,8,16]
                                          [--rows-per-warp 0] [--splits 0] [--loops auto] [--mma]
                                          [--mma-rounds 256] [--reps 30] [--shapes bar|rig]

For three weight shapes (``--shapes bar``: an MLP 12288 wide over a hidden size of 4096, where the bar was first
measured, and a 4096 x 4096 projection) or for every quantized product in the 4.1B rig's plain step (``--shapes
rig``: an MLP 8192 wide, 1024 x 4096 and 32 x 4096 projections, a 14336-token LM head; then their sum over the
step, each counted as often as the step runs it): milliseconds per product (20 products queued, then waited on) with
``mx.quantized_matmul`` and with the kernel (at each ``--rows-per-warp`` and each ``--splits``, the warps
sharing a set of weight rows; 0 is the kernel's own choice, for the number of rows and for the shape; and at each
``--loops``: ``auto`` the kernel's own loop order for the number of rows, ``rows`` each input row through the
weights, ``weights`` each weight through the input rows, the same arithmetic either way) and, with
``--mma``, the tensor-core kernel (quantized_mma.py) at each ``--splits`` and each ``--mma-rounds`` (the codes
of a weight row a warp loads at once), for each number of rows, all measured interleaved, median (min-max) over
``--reps``; then each one's k-row ÷ 1-row ratio (median of the per-repetition ratios, min-max), against the bar
of 1.3 for four rows; and the largest difference from MLX's result relative to |x| @ |w|. With several
``--rows-per-warp``, the fastest of them at each number of rows over the fastest at one row: the rows per warp
do not change a row's arithmetic, so each row bucket may take its own.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import time

from benchmarks.figures import spread

SHAPES = {"gate+up (12288 x 4096)": (12288, 4096), "attention/out (4096 x 4096)": (4096, 4096),
          "down (4096 x 12288)": (4096, 12288)}
# The 4.1B rig's (demo_model/rig.py) quantized products in one plain step of its body, and how many: 24 layers, 18
# of them gated-delta, 6 full attention; the embedding is a lookup, not a product.
RIG_SHAPES = {"mlp gate, up; gated-delta qkv; attention q (8192 x 4096)": (8192, 4096, 72),
              "mlp down (4096 x 8192)": (4096, 8192, 24),
              "gated-delta z, out; attention out (4096 x 4096)": (4096, 4096, 42),
              "attention k, v (1024 x 4096)": (1024, 4096, 12),
              "gated-delta a, b (32 x 4096)": (32, 4096, 36),
              "LM head (14336 x 4096)": (14336, 4096, 1)}
QUEUED = 20  # products queued before waiting, so each one's launch overlaps the one before
WARMUP = 3
BAR_ROWS, BAR = 4, 1.3


def int_list(text: str) -> list[int]:
    """An argument of comma-separated whole numbers: "1,2,4"."""
    return [int(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bits", type=int_list, default=[4, 8])
    parser.add_argument("--group-size", type=int, default=64)
    parser.add_argument("--rows", type=int_list, default=[1, 2, 4, 8, 16])
    parser.add_argument("--rows-per-warp", type=int_list, default=[0])
    parser.add_argument("--splits", type=int_list, default=[0])
    parser.add_argument("--loops", type=lambda text: text.split(","), default=["auto"],
                        help="loop orders of the CUDA-core kernel: auto, rows, weights")
    parser.add_argument("--mma", action="store_true", help="also the tensor-core kernel (4 and 8 bits)")
    parser.add_argument("--mma-rounds", type=int_list, help="codes per round (default: the kernel's own)")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--shapes", choices=["bar", "rig"], default="bar")
    args = parser.parse_args()

    import mlx.core as mx

    from engines.mlx.cuda import quantized_mma, use_cuda_kernel
    from engines.mlx.cuda.quantized_skinny import applies, k_split, product

    if not use_cuda_kernel():
        raise SystemExit("the kernel runs only where MLX runs on a CUDA GPU")
    def per_product(fn, xs) -> float:
        start = time.perf_counter()
        mx.eval([fn(x) for x in xs])
        return (time.perf_counter() - start) / len(xs) * 1e3

    print(f"{mx.default_device()}  mlx {mx.__version__}  group size {args.group_size}, "
          f"ms per product, median (min-max) of {args.reps}")
    g = args.group_size
    shapes = RIG_SHAPES if args.shapes == "rig" else {name: (n, k, 0) for name, (n, k) in SHAPES.items()}
    step = {}  # (bits, label, rows) -> the step's milliseconds: each shape's median times its count
    for name, (n, k, count) in shapes.items():
        for bits in args.bits:
            w = (mx.random.normal((n, k)) * k**-0.5).astype(mx.bfloat16)
            wq, scales, biases = mx.quantize(w, group_size=g, bits=bits)
            variants = {"mlx": lambda x: mx.quantized_matmul(x, wq, scales=scales, biases=biases, transpose=True,
                                                             group_size=g, bits=bits)}
            own_split = {}  # label -> its rows per warp, for the kernels at the shape's own K split
            for nw, split, loop in itertools.product(args.rows_per_warp, args.splits, args.loops):
                label = f"kernel/{nw or 'auto'}x{split or f'auto={k_split(n, k, bits)}'}"
                label += "" if loop == "auto" else f"/{loop}"
                weight_loop = {"auto": None, "rows": False, "weights": True}[loop]
                variants[label] = lambda x, nw=nw, split=split, weight_loop=weight_loop: product(
                    x, wq, scales, biases, bits, nw or None, split or None, weight_loop)
                if not split and loop == "auto":
                    own_split[label] = nw or "auto"
            for split in args.splits if args.mma and bits in quantized_mma.BITS else []:
                for codes in args.mma_rounds or [quantized_mma.CODES_PER_ROUND]:
                    label = f"mma/{split or f'auto={quantized_mma.k_split(n, k)}'}/{codes}"
                    variants[label] = lambda x, split=split, codes=codes: quantized_mma.product(
                        x, wq, scales, biases, g, bits, split or None, codes)
            inputs = {rows: [mx.random.normal((rows, k)).astype(mx.bfloat16) for _ in range(QUEUED)]
                      for rows in args.rows}
            dequantized = mx.dequantize(wq, scales, biases, group_size=g, bits=bits).astype(mx.float32)
            mx.eval(wq, scales, biases, dequantized, inputs)
            errors = {}
            for rows, xs in inputs.items():
                assert applies(xs[0], wq, scales, biases, g, bits)
                want = variants["mlx"](xs[0]).astype(mx.float32)
                magnitude = mx.abs(xs[0].astype(mx.float32)) @ mx.abs(dequantized).T
                errors[rows] = max((mx.abs(fn(xs[0]).astype(mx.float32) - want) / magnitude).max().item()
                                   for label, fn in variants.items() if label != "mlx")
            times = {(label, rows): [] for label in variants for rows in inputs}
            for rep in range(WARMUP + args.reps):
                order = list(variants.items())
                order = order[rep % len(order):] + order[: rep % len(order)]  # no variant always first
                for rows, xs in inputs.items():
                    for label, fn in order:
                        t = per_product(fn, xs)
                        if rep >= WARMUP:
                            times[label, rows].append(t)
            print(f"\n{name}, {bits}-bit")
            print(f"  {'rows':>4}  " + "  ".join(f"{label:>24}" for label in variants) + "  max rel diff")
            for rows in inputs:
                cells = "  ".join(f"{spread(times[label, rows], 4):>24}" for label in variants)
                print(f"  {rows:>4}  {cells}  {errors[rows]:.2g}")
            first = min(inputs)
            for rows in inputs:
                if rows == first:
                    continue
                ratios = "  ".join(
                    f"{label} {spread([a / b for a, b in zip(times[label, rows], times[label, first])], 2)}"
                    for label in variants)
                bar = f"  (bar: {BAR})" if rows == BAR_ROWS else ""
                print(f"  {rows} rows ÷ {first}: {ratios}{bar}")
            for (label, rows), values in times.items():
                kernel = re.sub(r"=\d+", "", label)  # the split each shape takes, out of the name
                step[bits, kernel, rows] = step.get((bits, kernel, rows), 0.0) + count * statistics.median(values)
            # Rows per warp leave each row's arithmetic as it is (the split does not depend on them), so each
            # number of rows may take its fastest: that kernel at k rows ÷ the fastest at one row.
            if len(own_split) > 1:
                fastest = {rows: min((statistics.median(times[label, rows]), label) for label in own_split)
                           for rows in inputs}
                print("  fastest rows per warp, and its time ÷ the fastest at one row: " + "  ".join(
                    f"{rows} rows: {own_split[label]} {ms / fastest[first][0]:.2f}"
                    for rows, (ms, label) in fastest.items()))
    if args.shapes == "rig":
        _print_step(step, args.rows)


def _print_step(step: dict, rows: list[int]) -> None:
    """The rig's products in one step, each product's median times its count, for every kernel and row count."""
    first = min(rows)
    print(f"\nthe 4.1B rig's quantized products in one step, ms (each shape's median x its count), and ÷ {first} row")
    for bits, label in dict.fromkeys((bits, label) for bits, label, _ in step):
        cells = "  ".join(f"{r} row{'s' if r > 1 else ''} {step[bits, label, r]:.3f} "
                          f"({step[bits, label, r] / step[bits, label, first]:.2f})" for r in rows)
        print(f"  {bits}-bit {label:>24}  {cells}")


if __name__ == "__main__":
    main()
