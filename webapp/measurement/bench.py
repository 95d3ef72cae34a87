"""``specchat bench``: a race's numbers from a terminal, through the app's own engine and lanes.

Each run does every draft block once per prompt, the order turned by one block
each run; block 1 is the drafter off, the baseline for speed-up and identity.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import orjson
from pydantic import ValidationError

from ..blas import blas_argument
from ..errors import describe_validation

DEFAULT_PROMPT = "What is 4821 + 3977?"
BAR_WIDTH = 24


class BadArguments(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise BadArguments(message)


def blocks(text: str) -> list[int | str]:
    try:
        values = [part if part == "auto" else int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of block sizes (or auto), "
                                         "e.g. 1,2,3,4,auto")
    if any(v != "auto" and not 1 <= v <= 16 for v in values) or len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"{text!r}: block sizes are 1 to 16, each listed once")
    if 1 not in values:
        raise argparse.ArgumentTypeError(f"{text!r} lacks block 1 (drafter off), the baseline for speed-up")
    return values


def runs(text: str) -> int | str:
    if text == "auto":
        return text
    if not text.isdigit() or not 1 <= int(text) <= 99:
        raise argparse.ArgumentTypeError(f"{text!r}: use 1 to 99 runs, or auto")
    return int(text)


def enough_runs(lanes, loops: list[str]):
    """For --runs auto: whether, on every loop, each drafting block's pairs with block 1 settle its speed-up
    (a verdict, or an interval within ±10% of the median: pairs.py), as a race's runs "auto" does."""
    from .lanes import tally
    from .pairs import settled

    def enough(results) -> bool:
        for loop in loops:
            mine = [lane for lane in lanes if lane.tag["loop"] == loop]
            baseline = next(lane for lane in mine if lane.key == 1)
            if not all(settled(tally(results, lane, baseline).ratios) for lane in mine if lane is not baseline):
                return False
        return True

    return enough


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="specchat bench", description="Decode speed with the drafter off and at each draft "
                     "block, interleaved, through the app's engine. Prints a table; --json writes it.")
    parser.add_argument("--engine", choices=["mlx", "mtplx", "openai", "fake"], default="mlx",
                        help="mlx: the model in this process (default); mtplx: a local MTPLX daemon; openai: an "
                        "OpenAI-compatible server (needs --base-url); fake: a scripted engine")
    parser.add_argument("--model", help="model folder or hub id (default: the bundled demo model)")
    parser.add_argument("--drafter", help="drafter folder or hub id, or 'none' (default: the model's MTP head)")
    parser.add_argument("--base-url", help="mtplx or openai engines: the server's address")
    parser.add_argument("--prompt", action="append", default=[], help="a prompt (repeat for more)")
    parser.add_argument("--prompts", type=Path, help="a file of prompts, one per line")
    parser.add_argument("--image", type=Path, action="append", default=[], dest="images",
                        help="an image attached to every prompt (repeat for more, up to 8): the table adds the time "
                        "to first token's parts (vision, prefill, first token) and the image tokens")
    parser.add_argument("--blocks", type=blocks, default=[1, 2, 3, 4, "auto"],
                        help="draft blocks to run, auto among them: the engine picks the block as each reply goes "
                        "(default 1,2,3,4,auto)")
    parser.add_argument("--runs", type=runs, default="auto", help="runs of every block and prompt, 1-99, or auto "
                        "(the default): runs added, up to 9, until each block's speed-up is settled")
    parser.add_argument("--max-tokens", type=int, default=256, help="most answer tokens per reply (default 256)")
    parser.add_argument("--budget", type=int, default=512, help="most thinking tokens per reply; 0 turns thinking "
                        "off (default 512, as the app)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature; 0 is greedy (default)")
    parser.add_argument("--top-p", type=float, default=1.0,
                        help="with a temperature above 0, sample from the likeliest tokens whose probabilities add "
                        "up to this (default 1.0: all of them)")
    parser.add_argument("--system-prompt", help="the system prompt of every reply (default: the app's)")
    parser.add_argument("--loop", choices=["specchat", "mlx-vlm", "both"], default="specchat",
                        help="MLX engine: specchat's own draft/verify loop (default), mlx-vlm's, or both side by "
                        "side, interleaved")
    parser.add_argument("--json", type=Path, dest="json_out", help="also write the results here as JSON")
    parser.add_argument("--cuda-kernels", choices=["tensor-cores", "cuda-cores", "mlx"], default="tensor-cores",
                        help="on an NVIDIA GPU, the MLX engine's few-row products: specchat's kernels with 4- and "
                             "8-bit layers on tensor cores (default), on the CUDA-core kernel, or MLX's own "
                             "products; elsewhere nothing changes")
    parser.add_argument("--blas", type=blas_argument, default=os.environ.get("SPECCHAT_BLAS"),
                        help="Linux CPU: auto, bundled or a library path, as for specchat")
    args = parser.parse_args(argv)
    if args.json_out is not None and not args.json_out.expanduser().resolve().parent.is_dir():
        parser.error(f"--json {args.json_out}: its folder does not exist")
    if args.drafter == "none" and any(block != 1 for block in args.blocks):
        parser.error("--drafter none can only run block 1: pass --blocks 1 or choose a drafter")
    if args.engine == "openai" and not args.base_url:
        parser.error("--engine openai needs --base-url, the server's /v1 URL")
    if args.prompts is not None:
        try:
            args.prompt += [line.strip() for line in args.prompts.read_text().splitlines() if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            parser.error(f"cannot read --prompts {args.prompts}: {exc}")
    args.prompt = args.prompt or [DEFAULT_PROMPT]
    args.images = read_images(parser, args.images)
    return args


def read_images(parser: _Parser, paths: list[Path]) -> tuple:
    """``--image`` files, checked as an upload is, as the engine gets them."""
    from ..conversations.images import MAX_PER_MESSAGE, read_image
    from ..errors import ClientError

    if len(paths) > MAX_PER_MESSAGE:
        parser.error(f"{len(paths)} --image files: a message takes at most {MAX_PER_MESSAGE}")
    images = []
    for path in paths:
        try:
            found = read_image(path.expanduser().read_bytes())
        except OSError as exc:
            parser.error(f"cannot read --image {path}: {exc.strerror or exc}")
        except ClientError as exc:
            parser.error(f"--image {path}: {exc.message}")
        images.append(found.as_image())
    return tuple(images)


def options_for(args: argparse.Namespace):
    from engines import GenerationOptions

    values = {"max_tokens": args.max_tokens, "reasoning_budget": args.budget, "temperature": args.temperature,
              "top_p": args.top_p}
    if args.system_prompt is not None:
        values["system_prompt"] = args.system_prompt
    try:
        return GenerationOptions().updated(values)
    except ValidationError as exc:
        raise BadArguments(describe_validation(exc)) from None


class Progress:
    """A bar on stderr, redrawn as each lane starts and ends."""

    def __init__(self, total: int, runs: int, prompts: int, started: float, loaded: str):
        self.total, self.runs, self.prompts, self.done = total, runs, prompts, 0
        self.started, self.loaded = started, loaded  # when the bench began; what loading took

    def frame(self, frame: dict) -> None:
        if frame["type"] not in ("start", "done"):
            return
        if self.loaded:  # the first measured run starts: what came before it, a user's wait for a first token
            sys.stderr.write(f"ready to measure {time.monotonic() - self.started:.1f} s after the start: "
                             f"{self.loaded}, then warm-ups and rehearsals\n")
            self.loaded = ""
        self.done += frame["type"] == "done"
        filled = BAR_WIDTH * self.done // self.total
        loop = f"{frame['loop']} " if "loop" in frame else ""
        where = f"{loop}block {frame['block']} · run {frame['run'] + 1}/{self.runs}"
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} {where}  ")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _spread(s: dict | None, unit: str = "") -> str:
    return "-" if s is None else f"{s['median']}{unit} ({s['min']}-{s['max']})"


def _judged(row: dict) -> str:
    """"faster 5/5 (94%: 2.2-2.4x)": the verdict, pairs won and the interval for the median speed-up."""
    confidence, pairs = row.get("confidence"), sum(r is not None for r in row.get("ratios") or [])
    if row["block"] == 1 or not pairs or confidence is None:
        return "-"
    return (f"{row['verdict']} {row['wins']}/{pairs} "
            f"({confidence['coverage']:.0%}: {confidence['low']}-{confidence['high']}x)")


def table(rows: list[dict]) -> str:
    header = ("block", "tok/s median (min-max)", "speed-up vs block 1", "verdict, pairs won (interval)",
              "acceptance", "mean accepted", "identical")
    lines = [header]
    for row in rows:
        speedup = row["speedup_range"] and {"median": row["speedup"], **row["speedup_range"]}
        lines.append((
            row["chose"], _spread(row["tok_s"]), _spread(speedup, "x"), _judged(row),
            "-" if row["acceptance"] is None else f"{row['acceptance']:.1%}",
            "-" if row["mean_accepted"] is None else f"{row['mean_accepted']:.2f}",
            {True: "yes", False: "NO", None: "-"}[row["identical"]],
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def main(argv: list[str]) -> int:
    try:
        args = parse_args(argv)
        options = options_for(args)
    except BadArguments as exc:
        print(f"specchat bench: {exc}", file=sys.stderr)
        return 2
    from ..blas import ensure_fast_blas
    from ..precision import keep_float32_exact

    keep_float32_exact()
    ensure_fast_blas(args.blas, ["bench", *argv])
    return run(args, options)


def kernel_choice(name: str):
    """``--cuda-kernels`` as the MLX engine's ``KernelChoice``."""
    from engines.mlx.cuda import KernelChoice

    return KernelChoice(few_rows=name != "mlx", tensor_cores=name == "tensor-cores")


def run(args: argparse.Namespace, options) -> int:
    from engines import EngineError, Message
    from engines.registry import EngineSpec, create_engine

    from engines.cancel import Relay

    from .busy import CpuWatch, describe
    from .lanes import LaneReply, Rehearsal, WarmUp, run_lanes, schedule, tally
    from .machine import machine, versions
    from .pairs import AUTO_MAX_PAIRS

    started = time.monotonic()
    spec = EngineSpec(name=args.engine, model=args.model, drafter=args.drafter, base_url=args.base_url,
                      api_key=os.environ.get("SPECCHAT_API_KEY"))
    try:
        engine = create_engine(spec, kernels=kernel_choice(args.cuda_kernels) if args.engine == "mlx" else None)
    except EngineError as exc:
        print(f"specchat bench: {exc.message}", file=sys.stderr)
        return 2
    cancel = Relay()
    try:
        engine.load(options)
        info = engine.info()
        if info.state != "ready":
            print(f"specchat bench: the engine did not load: {info.message}", file=sys.stderr)
            return 1
        if info.drafter is None and any(block != 1 for block in args.blocks):
            print(f"specchat bench: {info.model} has no drafter: pass --drafter, or --blocks 1", file=sys.stderr)
            return 2
        loops = ["specchat", "mlx-vlm"] if args.loop == "both" else [args.loop]
        lanes = [loop_lane(block, options, loop) for loop in loops for block in args.blocks]
        planned = AUTO_MAX_PAIRS if args.runs == "auto" else args.runs
        order = schedule(lanes, planned, len(args.prompt))
        said = [[Message("user", text, images=args.images)] for text in args.prompt]
        replies = [WarmUp(engine, "bench", lanes[0], 0, prompt, said[prompt]) for prompt in range(len(said))]
        replies += [Rehearsal(engine, "bench", lane, -1, prompt, said[prompt])
                    for lane in lanes for prompt in range(len(said))]
        replies += [LaneReply(engine, "bench", lane, run, prompt, said[prompt]) for run, prompt, lane in order]
        watch = CpuWatch()
        phases = ", ".join(f"{step} {seconds:.1f} s" for step, seconds in engine.load_phases)
        loaded = f"engine loaded in {time.monotonic() - started:.1f} s ({phases or 'no phases reported'})"
        progress = Progress(len(order), planned, len(args.prompt), started, loaded)
        enough = enough_runs(lanes, loops) if args.runs == "auto" else lambda results: False
        results = run_lanes(replies, cancel, progress.frame, enough)
        busy = watch.result()
        if 0 < progress.done < progress.total:  # stopped early (settled or failed): end the bar's line
            sys.stderr.write("\n")
    except KeyboardInterrupt:
        cancel.set()
        print("\nspecchat bench: interrupted", file=sys.stderr)
        return 130
    finally:
        engine.unload()
    failed = next((r for r in results if r.error), None)
    if failed is not None:
        print(f"\nspecchat bench: block {failed.lane.key}, run {failed.run + 1} failed: {failed.error['message']}",
              file=sys.stderr)
        return 1
    runs_done = max((r.run for r in results), default=-1) + 1
    runs_said = f"{runs_done} runs (auto)" if args.runs == "auto" else f"{runs_done} runs"
    images = f" · {len(args.images)} image(s) each" if args.images else ""
    print(f"{info.name} · {info.model} · drafter {info.drafter or 'none'} · {runs_said} × "
          f"{len(args.prompt)} prompt(s){images} · max {options.max_tokens} tokens · budget {options.reasoning_budget}")
    warning = describe(busy)
    if warning:
        print(warning)
    rows, comparison = [], []
    for loop in loops:
        mine = [lane for lane in lanes if lane.tag["loop"] == loop]
        baseline = next(lane for lane in mine if lane.key == 1)
        table_rows = [{**tally(results, lane, baseline).row(), **first_token_parts(results, lane)} for lane in mine]
        rows += [{**row, "loop": loop} for row in table_rows]
        if len(loops) > 1:
            print(f"\n{loop} loop")
        ran = loops_ran(table_rows)
        if ran:
            print(ran)
        print(table(table_rows))
        if args.images:
            print(parts_table(table_rows))
    if len(loops) > 1:
        for block in args.blocks:
            ours, theirs = (next(lane for lane in lanes if lane.key == block and lane.tag["loop"] == loop)
                            for loop in loops)
            compared = tally(results, ours, theirs)
            comparison.append({"block": block, "ratio": compared.speedup, "identical": compared.identical})
        print("\nspecchat loop ÷ mlx-vlm loop, same block, per run (median, min-max):")
        print("  ".join(f"block {c['block']}: {_spread(c['ratio'], 'x')}"
                        f"{'' if c['identical'] else ' (output differs)'}" for c in comparison))
    if args.json_out is not None:
        report = {"machine": machine(), "versions": versions(), "engine": info.name, "model": info.model,
                  "drafter": info.drafter, "runs": runs_done, "runs_auto": args.runs == "auto",
                  "prompts": args.prompt,
                  "images": [{k: getattr(i, k) for k in ("sha256", "mime", "width", "height")} for i in args.images],
                  "options": options.model_dump(include={"max_tokens", "reasoning_budget", "temperature", "top_p"}),
                  "rows": rows, "busy": busy}
        if comparison:
            report["loops"] = comparison
        args.json_out.expanduser().write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    return 0


def first_token_parts(results, lane) -> dict:
    """A block's time to first token split as its stats give it: the vision tower's time, the prefill after it
    and the first token's own step (medians, min-max), with the prompt's image tokens."""
    from .measures import spread

    runs = [r.stats for r in results if r.lane == lane and r.complete]
    first = [s["ttft_ms"] - (s.get("vision_ms") or 0) - (s.get("prefill_ms") or 0)
             if s.get("ttft_ms") is not None and s.get("prefill_ms") is not None else None for s in runs]
    return {"vision_ms": spread([s.get("vision_ms") for s in runs]),
            "prefill_ms": spread([s.get("prefill_ms") for s in runs]), "first_token_ms": spread(first),
            "image_tokens": max((s.get("image_tokens") or 0 for s in runs), default=0)}


def parts_table(rows: list[dict]) -> str:
    """The time to first token's parts per block, for runs with images."""
    header = ("block", "time to first token ms", "vision ms", "prefill ms", "first token ms", "image tokens")
    lines = [header] + [(str(row["block"]), _spread(row["ttft_ms"]), _spread(row["vision_ms"]),
                         _spread(row["prefill_ms"]), _spread(row["first_token_ms"]), str(row["image_tokens"]))
                        for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n" + "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines)


def loops_ran(rows: list[dict]) -> str:
    """Which decode loop the blocks ran on, and why where it was mlx-vlm's; empty when the engine does not say."""
    ran = {row["block"]: (row["decode_loop"], row.get("decode_loop_reason")) for row in rows if "decode_loop" in row}
    words = {key: loop + (f" ({reason})" if reason else "") for key, (loop, reason) in ran.items()}
    if len(set(words.values())) > 1:
        return "decode loop: " + "; ".join(f"block {block} {said}" for block, said in words.items())
    return f"decode loop: {next(iter(words.values()))}" if words else ""


def loop_lane(block: int | str, options, loop: str):
    """A block's lane on one decode loop; frames say which."""
    from .lanes import Lane, block_lane

    lane = block_lane(block, options.updated({"decode_loop": loop}))
    return Lane(lane.key, {**lane.tag, "loop": loop}, lane.options)
