"""Speed-up against acceptance, measured and ideal, on specchat's own loop: for each draft block, the acceptance
by depth, the tokens a round yields, the speed-up over drafter off (median of per-run ratios, min-max, blocks
interleaved) and the ideal speed-up from this machine's measured step costs.

    python -m benchmarks.acceptance RIG [--blocks 1,2,3,4,5,6,auto] [--runs 5] [--tokens 256] [--reps 30]
                                        [--chart PATH.png]

``--chart`` adds this rig's rows to the chart's record (PATH.json) and redraws the curve from every rig in it
(benchmarks/chart.py).

RIG is a rig of chosen acceptance (``python -m demo_model.rig RIG --acceptance P``) or any checkpoint with an MTP
head. The ideal is what the loop would reach if a round cost only its parts and a rejected draft cost nothing:

    ideal(k) = E[tokens per round] · t_plain ÷ ((k − 1) · t_draft + t_verify(k))

with t_plain one target step, t_draft one head step and t_verify(k) a verify of k positions, each measured alone
(``benchmarks.rounds``' step costs), and E[tokens per round] the runs' own. What a rejection costs now is printed
apart: a round that rejected a draft, less one that kept them all, in draft steps.

``auto`` is ``draft_block_size: "auto"`` as the MLX engine runs it (engines/block_policy.py): round times
learned live over the runs, acceptance afresh each run (a new conversation, as a race's lane). Its row gives the
blocks it ran (rounds per block, 1 = plain steps) and its median speed-up over the best fixed block's.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import statistics
import sys
import time
from pathlib import Path

from benchmarks.figures import spread
from benchmarks.rounds import PROMPT, step_costs


def chart_named(argv: list[str], chart: Path) -> list[str]:
    """The command as the chart's caption gives it: the chart by its file name, not the folder it was written to."""
    return [chart.name if arg == str(chart) else arg for arg in argv]


def auto_costs(auto_rounds: list[tuple[int, int, float]], fixed: dict, changes: list[int]) -> str:
    """What auto's rounds cost against the fixed lanes' rounds at the same blocks (above 1: auto pays for more than
    its choices, as its changes of block, each a round not planned ahead), and how often it changed block. A round
    at block k drafted k − 1 tokens."""
    fixed_s = {b: statistics.fmean(s for _, _, s in seen) for b, seen in fixed.items()
               if isinstance(b, int) and seen}
    priced = [(s, fixed_s[d + 1]) for _, d, s in auto_rounds if d + 1 in fixed_s]
    changed = f"changes of block per run {statistics.median(changes):g} ({min(changes)}-{max(changes)})" \
        if changes else "no runs"
    if not priced:
        return f"auto: {changed}"
    ratio = sum(s for s, _ in priced) / sum(f for _, f in priced)
    return (f"auto: {changed}; its rounds at blocks with a fixed lane ({len(priced)} of {len(auto_rounds)}) took "
            f"{ratio:.2f} of that lane's mean round")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--blocks", default="1,2,3,4,5,6")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--reps", type=int, default=30, help="repetitions of each step timing")
    parser.add_argument("--chart", type=Path, help="a PNG of speed-up against acceptance, redrawn with this rig")
    args = parser.parse_args()
    from webapp.blas import blas_in_use, ensure_fast_blas
    from webapp.precision import keep_float32_exact

    keep_float32_exact()
    ensure_fast_blas(None, sys.argv[1:], module="benchmarks.acceptance")
    import mlx.core as mx

    from engines.mlx.decoding import Sampling
    from engines.mlx.engine import own_decoder
    from engines.mlx.loading import load_drafter, load_model
    from engines.stats import acceptance_by_depth
    from webapp.measurement.machine import machine

    from engines.block_policy import AUTO, BLOCKS, Memory, block_label

    asked = args.blocks.split(",")
    blocks = sorted({1, *(int(b) for b in asked if b != AUTO)}) + ([AUTO] if AUTO in asked else [])
    drafting = [b for b in blocks if b != AUTO and b > 1]
    auto = Memory()  # the engine's: one per loaded model
    began = time.perf_counter()
    loaded = load_model(args.model)
    load_drafter(loaded, None)
    loaded_s = time.perf_counter() - began
    decoder, _, _, _ = own_decoder(loaded)
    checked_s = time.perf_counter() - began - loaded_s
    ids = loaded.tokenizer.encode(PROMPT, add_special_tokens=False)
    greedy = Sampling()
    print(f"machine: {machine()}; MLX on {mx.default_device()}; BLAS: {blas_in_use()}")
    print(f"model: {args.model}; {args.tokens} tokens; {args.runs} runs; blocks {blocks}")

    times, _ = step_costs(decoder, ids, drafting, args.reps)
    plain, draft = statistics.median(times["plain"]), statistics.median(times["draft"])
    histories: list[dict[str, int]] = []  # auto's rounds per block, per run
    changes: list[int] = []  # auto's changes of block, per run
    verify = {k: statistics.median(times[f"verify {k}"]) for k in drafting}
    print(f"plain step {plain * 1e3:.2f} ms; draft step {draft / plain:.3f} of it; "
          + "; ".join(f"verify {k}: {verify[k] / plain:.2f}" for k in drafting))

    def decode(block: int | str) -> tuple[float, list[tuple[int, int, float]]]:
        """(decode tok/s, (accepted, drafted, seconds) per round)."""
        state = decoder.new_state()
        first = decoder.feed(state, ids, 0, greedy)
        mx.eval(first)
        start = last = time.perf_counter()
        tokens, rounds, history, changed, previous = 0, [], {}, 0, None
        for step in decoder.decode(state, first, max_tokens=args.tokens,
                                   block=auto.policy(f"run {len(histories)}") if block == AUTO else block,
                                   sampling=greedy, stop_ids=set(), cancelled=lambda: False):
            now = time.perf_counter()
            tokens += len(step.tokens)
            if step.accepted is not None:
                rounds.append((step.accepted, step.proposed, now - last))
            if step.block is not None:
                history[str(step.block)] = history.get(str(step.block), 0) + 1
                if previous is not None and step.block != previous:
                    changed += 1
                previous = step.block
            last = now
        if block == AUTO:
            histories.append(history)
            changes.append(changed)
        return (tokens - 1) / (time.perf_counter() - start), rounds

    rehearsed = time.perf_counter()
    # Rehearsal: compiles every length the runs use, auto's blocks too (a block's first round compiles its steps:
    # seconds on a GPU, which would land in whichever measured run auto first tried it in).
    for block in blocks + ([k for k in BLOCKS if k not in blocks] if AUTO in blocks else []):
        decode(block)
    print(f"start: model and drafter loaded {loaded_s:.1f} s, own loop checked {checked_s:.1f} s, "
          f"rehearsal of every block {time.perf_counter() - rehearsed:.1f} s")
    rates: dict[int, list[float]] = {b: [] for b in blocks}
    rounds: dict[int | str, list[tuple[int, int, float]]] = {b: [] for b in blocks if b != 1}
    for run in range(args.runs):
        turn = run % len(blocks)
        for block in blocks[turn:] + blocks[:turn]:
            rate, seen = decode(block)
            rates[block].append(rate)
            if block != 1:
                rounds[block] += seen[1:-1]  # the first and last rounds hold the prefill's and the cut's time

    charted: dict[str, dict] = {}
    first_depth: list[float] = []
    print(f"\nblock 1 (drafter off): {spread(rates[1], 1)} tok/s")
    print("block | acceptance by depth | tokens per round | speed-up | ideal | measured ÷ ideal | rejection, draft steps")
    for block in drafting:
        kept = rounds[block]
        per_round = statistics.mean(a + 1 for a, _, _ in kept)
        speedups = [on / off for on, off in zip(rates[block], rates[1])]
        ideal = per_round * plain / ((block - 1) * draft + verify[block])
        depth = " ".join(f"{share:.2f}" for share in acceptance_by_depth([(a, d) for a, d, _ in kept]))
        rejected = [s for a, d, s in kept if a < d]
        whole = [s for a, d, s in kept if a == d]
        cost = (f"{(statistics.median(rejected) - statistics.median(whole)) / draft:+.1f}"
                if rejected and whole else "-")
        print(f"{block} | {depth} | {per_round:.2f} | {spread(speedups)}× | {ideal:.2f}× | "
              f"{statistics.median(speedups) / ideal:.2f} | {cost}")
        charted[str(block)] = {"median": statistics.median(speedups), "min": min(speedups), "max": max(speedups),
                               "ideal": ideal}
        first_depth += [1.0 if a else 0.0 for a, _, _ in kept]
    if AUTO in blocks:
        runs = histories[-args.runs:]  # the measured runs, not the rehearsal
        ran = {k: sum(h.get(k, 0) for h in runs) for k in sorted({k for h in runs for k in h}, key=int)}
        speedups = [on / off for on, off in zip(rates[AUTO], rates[1])]
        kept = rounds[AUTO]
        depth = " ".join(f"{share:.2f}" for share in acceptance_by_depth([(a, d) for a, d, _ in kept])) or "-"
        per_round = f"{statistics.mean(a + 1 for a, _, _ in kept):.2f}" if kept else "-"
        fixed = {b: statistics.median(r / o for r, o in zip(rates[b], rates[1])) for b in drafting}
        best = max(fixed, key=fixed.get, default=None)
        against = f"; ÷ the best fixed block ({best}): {statistics.median(speedups) / fixed[best]:.2f}" if best else ""
        print(f"{block_label(AUTO, ran)} | {depth} | {per_round} | {spread(speedups)}× | - | - | - "
              f"(rounds per block over the runs: {ran}{against})")
        print(auto_costs(kept, rounds, changes[-args.runs:]))
        charted[AUTO] = {"median": statistics.median(speedups), "min": min(speedups), "max": max(speedups)}
    if args.chart and first_depth:
        from benchmarks.chart import add_run, draw

        today = datetime.date.today().isoformat()
        runs = add_run(args.chart, {"model": args.model, "acceptance": statistics.mean(first_depth),
                                    "blocks": charted, "date": today})
        host = machine()
        where = host.get("accelerator") or f"{host['cpu']}, {host['cores']} cores"
        draw(args.chart, runs, f"specchat's own loop: speed-up against acceptance · {where} · {today}",
             "python -m benchmarks.acceptance " + shlex.join(chart_named(sys.argv[1:], args.chart)))
        print(f"chart: {args.chart} ({len(runs)} rigs)")


if __name__ == "__main__":
    sys.exit(main())
