"""The quantized few-row kernels timed on the GPU alone, with CUDA events (CuPy), on an NVIDIA GPU.

    python -m benchmarks.kernel_events [--bits 4,8] [--rows 1,2,4] [--shapes bar|rig] [--reps 15] [--resident]

``benchmarks.quantized_skinny`` times a product as MLX runs it, Python and MLX's own work per operation included
(10-20 microseconds each, more than a small product's GPU time), so its ratios mix the kernels with that cost.
Here each kernel's source (the engine's own, compiled by CuPy's runtime compiler with the template MLX would give
it) runs 20 times back to back behind a 2 ms spin that lets every launch queue up first; the time between two
events over those 20, per product, median (min-max) over ``--reps``. Weights rotate through copies that together
are four times the L2 cache, as a step's layers stream theirs from memory (``--resident`` also times one copy
in cache). For each shape and bit width:

- the CUDA-core kernel (quantized_skinny.py) in both loop orders (``rows``: each input row through the weights,
  ``weights``: each weight through the input rows) at 4 and 8 weight rows per warp, and as the kernel chooses
  them itself (``chosen``: what the engine runs at other bit widths, and at these with ``KernelChoice.tensor_cores``
  off); every variant's rows are checked bit for bit against the chosen one's, since the loop order and
  the rows per warp leave each row's arithmetic as it is;
- the tensor-core kernel (quantized_mma.py) at its own split, the engine's for 4- and 8-bit layers;
- per kernel, k rows ÷ one row; and the tensor-core kernel's k rows ÷ the CUDA-core kernel's chosen one row.

Needs CuPy (its runtime compiler) and a CUDA GPU; MLX is not used.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from benchmarks.figures import spread
from benchmarks.quantized_skinny import RIG_SHAPES, SHAPES, int_list

GROUP_SIZE = 64
QUEUED = 20
SPIN_CYCLES = 4_000_000  # about 2 ms at 1.98 GHz: longer than queuing 20 launches takes
STREAMED_BYTES = 4 * 60_000_000  # four times an H200's L2

# bfloat16 as its 16 bits, so that CuPy (which has no bfloat16) passes it as uint16
PRELUDE = r"""
struct bf16 {
    unsigned short v;
    __device__ operator float() const { return __uint_as_float(((unsigned int)v) << 16); }
    __device__ bf16() {}
    __device__ bf16(float f) { unsigned int u = __float_as_uint(f); u += 0x7FFFu + ((u >> 16) & 1u); v = u >> 16; }
};
typedef unsigned int uint32_t;
extern "C" __global__ void spin(long long cycles) {
    const long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
"""


def _kernel(name: str, params: str, source: str) -> str:
    """A source as MLX wraps it, the shapes it reads taken from plain arguments."""
    shapes = {"x_shape": "{M_, K_}", "wq_shape": "{N_, 0}", "scales_shape": "{N_, G_}"}
    return (f"template <{params}>\n__global__ void {name}(const bf16* x, const uint32_t* wq, const bf16* scales, "
            "const bf16* biases, bf16* y, int M_, int K_, int N_, int G_) {\n"
            + "".join(f"    const int {shape}[2] = {value};\n" for shape, value in shapes.items() if shape in source)
            + source.replace("size_t", "unsigned long long") + "\n}\n")


def module_source() -> str:
    from engines.mlx.cuda import quantized_mma, quantized_skinny

    return (PRELUDE + quantized_skinny.HEADER + quantized_mma.HEADER.replace("size_t", "unsigned long long")
            + _kernel("skinny", "typename T, typename S, int MR, int NW, int BITS, int E, int KS, int WARPS, "
                      "int PER_WEIGHT", quantized_skinny.SOURCE)
            + _kernel("mma", "typename T, typename S, int BF, int MR, int BITS, int GS, int KS, int WARPS, int LANES, "
                      "int CPR", quantized_mma.SOURCE))


def variants(n: int, k: int, bits: int, rows: int) -> dict[str, tuple[str, tuple, tuple]]:
    """label -> (template instance, grid, block) for one product of ``rows`` rows."""
    from engines.mlx.cuda import quantized_mma as mma
    from engines.mlx.cuda import quantized_skinny as qs

    split = qs.k_split(n, k, bits)
    out = {}

    def skinny(nw: int, weight_loop: bool):
        name = (f"skinny<bf16, bf16, {qs.row_bucket(rows)}, {nw}, {bits}, {qs.lane_step(bits)}, {split}, "
                f"{qs.WARPS}, {int(weight_loop)}>")
        return name, (1, -(-(-(-n // nw) * split) // qs.WARPS), 1), (qs.LANES, qs.WARPS, 1)

    out["chosen"] = skinny(qs.rows_per_warp(bits, rows, n, k), qs.per_weight(bits, rows))
    for loop, nw in itertools.product(("rows", "weights"), (4, 8)):
        out[f"{loop}/{nw}"] = skinny(nw, loop == "weights")
    if bits in mma.BITS:
        mma_split = mma.k_split(n, k)
        name = (f"mma<bf16, bf16, 1, {mma.row_bucket(rows)}, {bits}, {GROUP_SIZE}, {mma_split}, {mma.WARPS}, "
                f"{mma.LANES}, {mma.CODES_PER_ROUND}>")
        out["tensor cores"] = (name, (1, -(-(-(-n // mma.WEIGHT_ROWS) * mma_split) // mma.WARPS), 1),
                               (mma.LANES, mma.WARPS, 1))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bits", type=int_list, default=[4, 8])
    parser.add_argument("--rows", type=int_list, default=[1, 2, 4])
    parser.add_argument("--shapes", choices=["bar", "rig"], default="bar")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--resident", action="store_true", help="also time one weight copy, in cache")
    args = parser.parse_args()

    import cupy as cp
    import numpy as np

    places = ("streamed", "resident") if args.resident else ("streamed",)
    shapes = {name: shape[:2] for name, shape in (RIG_SHAPES if args.shapes == "rig" else SHAPES).items()}
    plans = {(bits, n, k, rows): variants(n, k, bits, rows) for bits in args.bits for n, k in shapes.values()
             for rows in args.rows}
    names = sorted({name for plan in plans.values() for name, _, _ in plan.values()})
    start = time.perf_counter()
    module = cp.RawModule(code=module_source(), options=("--std=c++17",), name_expressions=names)
    spin = module.get_function("spin")
    kernels = {name: module.get_function(name) for name in names}
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: {len(names)} kernels compiled in "
          f"{time.perf_counter() - start:.0f} s; microseconds per product, median (min-max) of {args.reps}")
    rng = np.random.default_rng(0)
    begin, end = cp.cuda.Event(), cp.cuda.Event()

    def bf16(a):
        return cp.asarray((a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))

    for (label, (n, k)), bits in itertools.product(shapes.items(), args.bits):
        groups = k // GROUP_SIZE
        size = n * k * bits // 8 + 4 * n * groups
        copies = max(1, -(-STREAMED_BYTES // size))
        weights = [(cp.asarray(rng.integers(0, 2**32, size=(n, k * bits // 32), dtype=np.uint32)),
                    bf16(rng.uniform(0.001, 0.01, size=(n, groups))), bf16(rng.uniform(-0.05, 0.05, size=(n, groups))))
                   for _ in range(copies)]
        x = bf16(rng.normal(size=(max(args.rows), k)))
        y = cp.zeros((max(args.rows), n), dtype=cp.uint16)

        def launch(plan, rows, weight):
            name, grid, block = plan
            kernels[name](grid, block, (x, *weight, y, np.int32(rows), np.int32(k), np.int32(n),
                                                    np.int32(groups)))

        times, same = {}, True
        for rows in args.rows:
            for variant, plan in plans[bits, n, k, rows].items():
                launch(plan, rows, weights[0])
                out = y[:rows].copy()
                if variant == "chosen":
                    chosen_out = out
                elif variant != "tensor cores":
                    same &= bool((out == chosen_out).all())
                for place in places:
                    values = []
                    for rep in range(args.reps + 2):
                        spin((1, 1, 1), (1, 1, 1), (np.int64(SPIN_CYCLES),))
                        begin.record()
                        for i in range(QUEUED):
                            launch(plan, rows, weights[(rep + i) % copies if place == "streamed" else 0])
                        end.record()
                        end.synchronize()
                        if rep >= 2:
                            values.append(cp.cuda.get_elapsed_time(begin, end) * 1000 / QUEUED)
                    times[variant, rows, place] = values
        print(f"\n{label}, {bits}-bit ({copies} weight copies streamed); every CUDA-core variant's rows equal the "
              f"chosen one's bit for bit: {'yes' if same else 'NO'}")
        for place in places:
            print(f"  {place}: {'variant':>12}  " + "  ".join(f"{rows} row{'s' if rows > 1 else '':<1}".rjust(18)
                                                            for rows in args.rows) + "  ratios to 1 row")
            first = min(args.rows)
            one_row = statistics.median(times["chosen", first, place])
            for variant in plans[bits, n, k, first]:
                medians = {rows: statistics.median(times[variant, rows, place]) for rows in args.rows}
                ratios = " ".join(f"{rows}/{first} {medians[rows] / medians[first]:.2f}" for rows in args.rows
                                  if rows != first)
                if variant == "tensor cores":
                    ratios += " (÷ chosen 1 row: " + " ".join(
                        f"{rows}/{first} {medians[rows] / one_row:.2f}" for rows in args.rows) + ")"
                print(f"  {'':>{len(place)}}  {variant:>12}  "
                      + "  ".join(spread(times[variant, rows, place], 1).rjust(18) for rows in args.rows)
                      + f"  {ratios}")
        del weights
        cp.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
