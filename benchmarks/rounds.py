"""Where a draft/verify round's time goes, and how close the loop comes to its ideal.

    python -m benchmarks.rounds MODEL [--blocks 2,3,4] [--runs 5] [--tokens 128] [--reps 40] [--no-kernel]
                                      [--cuda-cores]
                                      [--model-thread]

On specchat's own loop (the one the MLX engine runs), in this process, greedy:

- the cost of one plain target step, one draft step of the MTP head and a verify of k
  positions, each measured alone (waited on), modes interleaved; ``c`` = draft ÷ plain; and the
  share of each that passes before building and launching it returns (on a GPU, near 1 means the
  host's launching is what the step costs, not the device's work; on a CPU the work runs while
  it is launched);
- decode tok/s with the drafter off (block 1) and at each block, runs interleaved, and the
  speed-up (median of per-run ratios against the block-1 run of the same round, min-max);
- the ideal speed-up E[accepted + 1] ÷ (1 + (k − 1)·c) at each block, from the acceptance the
  runs saw, and the fraction of it reached.

Run it on a quiet machine (or at a real-time priority, e.g. ``chrt -f 10``): the ratios are
side by side, but a core taken away mid-run still skews them.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from benchmarks.figures import spread

PROMPT = "<|im_start|>user\nhello there, how does the drafter work?<|im_end|>\n<|im_start|>assistant\n"


def _progress(started: float, what: str) -> None:
    print(f"[{time.perf_counter() - started:.1f} s] {what}", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--blocks", default="2,3,4")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--reps", type=int, default=40, help="repetitions of each step timing")
    parser.add_argument("--no-kernel", action="store_true",
                        help="CUDA: MLX's own products for a few rows instead of specchat's kernel")
    parser.add_argument("--cuda-cores", action="store_true",
                        help="CUDA: 4- and 8-bit products on the CUDA-core kernel (cuda/quantized_skinny.py), not on "
                        "tensor cores")
    parser.add_argument("--model-thread", action="store_true",
                        help="run everything on the engine's MLX thread (its own streams), as the app does")
    args = parser.parse_args()
    if args.model_thread:
        from engines.mlx.model_thread import model_thread

        model_thread().submit(measure, args).result()
    else:
        measure(args)


def step_costs(decoder, ids: list[int], blocks: list[int], reps: int) -> tuple[dict, dict]:
    """Each step measured alone, interleaved, ``reps`` times after three compiling calls: a plain target step
    (``plain``), one chained draft step of the head (``draft``) and a verify of k positions (``verify k``), in
    seconds, and the share of each that passed before launching it returned."""
    import mlx.core as mx

    from engines.mlx.decoding import Sampling

    greedy = Sampling()
    state = decoder.new_state()
    mx.eval(decoder.feed(state, ids, 0, greedy))

    def timed(outputs, start: float) -> tuple[float, float]:
        """(whole step, time until launching returned): launched without waiting, then waited on."""
        mx.async_eval(*outputs)
        launched = time.perf_counter()
        mx.eval(*outputs)
        return time.perf_counter() - start, launched - start

    def verify(length: int) -> tuple[float, float]:
        tokens = mx.array([[ids[-1]] * length], dtype=mx.int32)
        start = time.perf_counter()
        result = decoder.target.verify(state.target, tokens)
        timing = timed([result.tokens, result.layers], start)
        decoder.target.commit(state.target, result, 0)
        return timing

    def draft() -> tuple[float, float]:
        caches = state.drafter.snapshot()
        start = time.perf_counter()
        tokens, _ = decoder.drafter.draft(caches, 3, greedy)  # block 3: one chained head step
        return timed([tokens, caches.layers], start)

    steps = {"plain": lambda: verify(1), "draft": draft, **{f"verify {k}": (lambda k=k: verify(k)) for k in blocks}}
    times: dict[str, list[float]] = {name: [] for name in steps}
    launch_shares: dict[str, list[float]] = {name: [] for name in steps}
    for rep in range(reps + 3):
        for name, run in steps.items():
            elapsed, launched = run()
            if rep >= 3:  # the first calls compile
                times[name].append(elapsed)
                launch_shares[name].append(launched / elapsed)
    return times, launch_shares


def measure(args: argparse.Namespace) -> None:
    blocks = [int(b) for b in args.blocks.split(",")]
    started = time.perf_counter()

    import mlx.core as mx

    from engines.mlx.cuda import KernelChoice
    from engines.mlx.decoding import Sampling
    from engines.mlx.engine import own_decoder
    from engines.mlx.loading import load_drafter, load_model
    from webapp.blas import blas_in_use

    loaded = load_model(args.model)
    load_drafter(loaded, None)
    decoder, _, _, _ = own_decoder(loaded, kernels=KernelChoice(few_rows=not args.no_kernel,
                                                                tensor_cores=not args.cuda_cores))
    _progress(started, "loaded")
    ids = loaded.tokenizer.encode(PROMPT, add_special_tokens=False)
    greedy = Sampling()

    times, launch_shares = step_costs(decoder, ids, blocks, args.reps)
    _progress(started, "step costs measured")
    plain = statistics.median(times["plain"])
    c = statistics.median(times["draft"]) / plain
    print(f"{args.model}  BLAS: {blas_in_use()}")
    print(f"plain step {plain * 1e3:.2f} ms; draft step c = {c:.3f} of it; "
          + "; ".join(f"verify {k}: {statistics.median(times[f'verify {k}']) / plain:.2f}" for k in blocks))
    print("launch returned after (share of the step): "
          + "; ".join(f"{name} {statistics.median(shares):.2f}" for name, shares in launch_shares.items()))

    def decode(block: int) -> tuple[float, int, int, int]:
        run_state = decoder.new_state()
        first = decoder.feed(run_state, ids, 0, greedy)
        mx.eval(first)
        start, tokens, accepted, rounds = time.perf_counter(), 0, 0, 0
        for step in decoder.decode(run_state, first, max_tokens=args.tokens, block=block, sampling=greedy,
                                   stop_ids=set(), cancelled=lambda: False):
            tokens += len(step.tokens)
            if step.accepted is not None:
                accepted, rounds = accepted + step.accepted, rounds + 1
        return (tokens - 1) / (time.perf_counter() - start), tokens, accepted, rounds

    order = [1, *blocks]
    for block in order:  # rehearsal: compiles every length this run uses
        decode(block)
    _progress(started, "rehearsed")
    rates: dict[int, list[float]] = {b: [] for b in order}
    speedups: dict[int, list[float]] = {b: [] for b in blocks}
    acceptance: dict[int, tuple[int, int]] = {}
    for run in range(args.runs):
        for block in order if run % 2 == 0 else order[::-1]:
            rate, _, accepted, rounds = decode(block)
            rates[block].append(rate)
            acceptance[block] = (accepted, rounds)
        for block in blocks:
            speedups[block].append(rates[block][-1] / rates[1][-1])
        _progress(started, f"run {run + 1}/{args.runs}")
    print(f"block 1 (drafter off): {spread(rates[1])} tok/s")
    print("block | tok/s | speed-up | mean accepted | ideal | of ideal")
    for block in blocks:
        accepted, rounds = acceptance[block]
        mean_accepted = accepted / rounds
        ideal = (mean_accepted + 1) / (1 + (block - 1) * c)
        median = statistics.median(speedups[block])
        print(f"{block} | {spread(rates[block])} | {spread(speedups[block])} | "
              f"{mean_accepted:.2f} | {ideal:.2f} | {median / ideal:.2f}")


if __name__ == "__main__":
    main()
