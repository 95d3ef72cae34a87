"""Decode speed of the MLX engine's two decode loops side by side: mlx-vlm's and specchat's own.

    python -m benchmarks.decode_loop [--model DIR] [--blocks 1,2,3,4] [--runs 5] [--max-tokens 128]

Every (loop, block) is a lane of the app's engine (``decode_loop`` and the draft block set per
message, block 1 being the drafter off), run as ``specchat bench --loop both`` runs them: one reply
per lane and prompt each run, the order turned by one lane each run. Unlike bench, every lane is
rehearsed once first, unrecorded, so no run times compiling (on a GPU a lane's first reply can be
ten times slower), and one table shows both loops side by side. Speed-ups pair each run with the
same loop's block 1; "identical" compares each reply's text with mlx-vlm's loop at block 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LOOPS = ("mlx-vlm", "specchat")
DEFAULT_PROMPT = "Write a long story about a lighthouse keeper."


def parse_args(argv: list[str]) -> argparse.Namespace:
    from webapp.bench import blocks, runs

    parser = argparse.ArgumentParser(prog="python -m benchmarks.decode_loop", description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the bundled demo model)")
    parser.add_argument("--blocks", type=blocks, default=[1, 2, 3, 4], help="draft blocks (default 1,2,3,4)")
    parser.add_argument("--loops", default=",".join(LOOPS), help="decode loops to compare (default both)")
    parser.add_argument("--runs", type=runs, default=5, help="runs of every lane and prompt (default 5)")
    parser.add_argument("--prompt", action="append", default=[], help="a prompt (repeat for more)")
    parser.add_argument("--max-tokens", type=int, default=128, help="answer tokens per reply (default 128)")
    parser.add_argument("--budget", type=int, default=0, help="thinking tokens per reply (default 0: off)")
    parser.add_argument("--json", type=Path, dest="json_out", help="also write the results here as JSON")
    parser.add_argument("--blas", default=None, help="Linux CPU: auto, bundled or a library path, as for specchat")
    args = parser.parse_args(argv)
    args.loops = [loop.strip() for loop in args.loops.split(",")]
    if not args.loops or any(loop not in LOOPS for loop in args.loops):
        parser.error(f"--loops: pick from {', '.join(LOOPS)}")
    args.prompt = args.prompt or [DEFAULT_PROMPT]
    return args


def lanes_for(args: argparse.Namespace, options) -> list:
    from webapp.bench import loop_lane

    return [loop_lane(block, options, loop) for loop in args.loops for block in args.blocks]


def _key(lane) -> tuple[str, int]:
    return lane.tag["loop"], lane.key


def measure(engine, lanes: list, args: argparse.Namespace) -> list:
    """Rehearse every lane once (unrecorded), then play the interleaved runs; returns the recorded results."""
    from engines import Message
    from webapp.lanes import LaneReply, Relay, WarmUp, run_lanes, schedule

    class Rehearsal(LaneReply):
        recorded = False

    def progress(frame: dict) -> None:
        if frame["type"] == "done":
            stats = frame.get("stats") or {}
            print(f"  {frame['loop']:>8} block {frame['block']} run {frame['run']}: {stats.get('tok_s')} tok/s",
                  file=sys.stderr, flush=True)

    messages = [[Message("user", text)] for text in args.prompt]
    replies = [WarmUp(engine, "warm", lanes[0], 0, p, messages[p]) for p in range(len(messages))]
    replies += [Rehearsal(engine, "rehearse", lane, -1, p, messages[p]) for lane in lanes for p in range(len(messages))]
    replies += [LaneReply(engine, "run", lane, run, p, messages[p])
                for run, p, lane in schedule(lanes, args.runs, len(messages))]
    results = run_lanes(replies, Relay(), progress)
    failed = next((r for r in results if r.error), None)
    if failed is not None:
        loop, block = _key(failed.lane)
        raise RuntimeError(f"{loop} loop, block {block}, run {failed.run}: {failed.error['message']}")
    return results


def rows(results: list, lanes: list, blocks: list[int], loops: list[str]) -> list[dict]:
    from webapp.lanes import tally

    by_key = {_key(lane): lane for lane in lanes}
    reference = by_key[(loops[0], 1)]
    out = []
    for block in blocks:
        row = {"block": block}
        for loop in loops:
            lane = by_key[(loop, block)]
            own = tally(results, lane, by_key[(loop, 1)])
            row[loop] = {"tok_s": own.tok_s, "speedup": own.speedup, "acceptance": own.acceptance,
                         "mean_accepted": own.mean_accepted,
                         "identical": tally(results, lane, reference).identical}
        if len(loops) == 2:
            row["ratio"] = tally(results, by_key[(loops[1], block)], by_key[(loops[0], block)]).speedup
        out.append(row)
    return out


def _spread(s: dict | None, unit: str = "") -> str:
    return "-" if s is None else f"{s['median']}{unit} ({s['min']}-{s['max']})"


def table(rows: list[dict], loops: list[str]) -> str:
    header = ["block"]
    for loop in loops:
        header += [f"{loop} tok/s", f"{loop} ×", f"{loop} acc."]
    if len(loops) == 2:
        header.append(f"{loops[1]} ÷ {loops[0]}")
    header.append("identical")
    lines = [header]
    for row in rows:
        line = [str(row["block"])]
        for loop in loops:
            cell = row[loop]
            speedup = None if row["block"] == 1 else cell["speedup"]
            line += [_spread(cell["tok_s"]), _spread(speedup, "x"),
                     "-" if cell["acceptance"] is None else f"{cell['acceptance']:.1%}"]
        if len(loops) == 2:
            line.append(_spread(row["ratio"], "x"))
        same = [row[loop]["identical"] for loop in loops]
        line.append("yes" if all(same) else "NO" if False in same else "-")
        lines.append(line)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    from webapp.blas import ensure_fast_blas

    ensure_fast_blas(args.blas, argv, module="benchmarks.decode_loop")
    from demo_model import DEFAULT_MODEL
    from engines import GenerationOptions
    from engines.mlx.engine import MlxEngine
    from webapp.machine import machine, versions

    model = args.model or str(DEFAULT_MODEL)
    options = GenerationOptions().updated({"max_tokens": args.max_tokens, "reasoning_budget": args.budget,
                                           "draft_block_size": max(args.blocks) if max(args.blocks) > 1 else 4})
    engine = MlxEngine(model)
    try:
        engine.load(options)
        info = engine.info()
        if info.state != "ready":
            print(f"decode_loop: the engine did not load: {info.message}", file=sys.stderr)
            return 1
        if info.drafter is None and max(args.blocks) > 1:
            print(f"decode_loop: {model} has no MTP head: pass --blocks 1", file=sys.stderr)
            return 2
        lanes = lanes_for(args, options)
        try:
            results = measure(engine, lanes, args)
        except RuntimeError as exc:
            print(f"decode_loop: {exc}", file=sys.stderr)
            return 1
    finally:
        engine.unload()
    table_rows = rows(results, lanes, args.blocks, args.loops)
    print(f"{model} · drafter {info.drafter or 'none'} · {args.runs} runs × {len(args.prompt)} prompt(s) · "
          f"max {args.max_tokens} tokens · budget {args.budget} · {machine().get('accelerator') or 'cpu'}")
    print(table(table_rows, args.loops))
    if args.json_out is not None:
        report = {"machine": machine(), "versions": versions(), "model": model, "drafter": info.drafter,
                  "runs": args.runs, "prompts": args.prompt, "max_tokens": args.max_tokens, "budget": args.budget,
                  "rows": table_rows}
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
