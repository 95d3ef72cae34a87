"""Receipts: each race's and block sweep's numbers with what they were measured on, as JSON or Markdown, kept
across restarts."""

from __future__ import annotations

import logging
import shlex
import threading
import time
from collections import OrderedDict
from pathlib import Path

import orjson

from engines import EngineInfo, GenerationOptions
from engines.registry import EngineSpec

from ..atomic import write_json
from .busy import describe
from .lanes import ran_on, sweep_order
from .machine import machine, versions

log = logging.getLogger(__name__)
KEEP_IN_MEMORY = 64
NEAR_TIE = 0.5  # a logit margin below this is within what two roundings of a bfloat16 step can move


class Receipts:
    """Kept in memory (the latest few) and as ``receipts/<id>.json`` in the data dir."""

    def __init__(self, data_dir: Path | None):
        self._dir = Path(data_dir) / "receipts" if data_dir else None
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, dict] = OrderedDict()

    def record(self, summary: dict, **context) -> str:
        """Store the receipt of a finished race (its ``race_done`` frame); returns its address."""
        return self.keep(build(summary, **context))

    def record_sweep(self, summary: dict, **context) -> str:
        """Store the receipt of a finished block sweep (its ``sweep_done`` frame); returns its address."""
        return self.keep(build_sweep(summary, **context))

    def keep(self, receipt: dict) -> str:
        id = receipt["id"]
        with self._lock:
            self._kept[id] = receipt
            self._kept.move_to_end(id)
            while len(self._kept) > KEEP_IN_MEMORY:
                self._kept.popitem(last=False)
        if self._dir is not None:
            try:
                write_json(self._dir / f"{id}.json", receipt)
            except OSError as exc:  # the measurement still happened; only its copy on disk is missing
                log.warning("could not save the receipt of %s %s: %s", receipt["kind"], id, exc)
        return f"/api/receipts/{id}"

    def get(self, id: str) -> dict | None:
        with self._lock:
            if id in self._kept:
                return self._kept[id]
        path = self._dir / f"{id}.json" if self._dir is not None else None
        if path is None or not path.is_file():
            return None
        return orjson.loads(path.read_bytes())


def _measured(kind: str, summary: dict, *, prompt: str, options: GenerationOptions, engine: EngineInfo,
              context_messages: int, at: float, images: list[dict]) -> dict:
    """What every receipt holds: what was measured, on what, with which settings."""
    return {
        "kind": kind,
        "id": summary["id"],
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)),
        "finish_reason": summary["finish_reason"],
        "machine": machine(),
        "versions": versions(),
        "engine": engine.name, "model": engine.model, "drafter": engine.drafter,
        "decode_loop": options.decode_loop,
        "sampling": {"temperature": options.temperature, "top_p": options.top_p},
        "reasoning_budget": options.reasoning_budget, "max_tokens": options.max_tokens,
        "prompt": prompt, "context_messages": context_messages,
        "images": [{key: image[key] for key in ("id", "mime", "width", "height")} for image in images],
        "busy": summary.get("busy"),
    }


def build(summary: dict, *, prompt: str, options: GenerationOptions, engine: EngineInfo, spec: EngineSpec,
          runs: int, context_messages: int, at: float, images: list[dict] = ()) -> dict:
    """A race's receipt, from its ``race_done`` frame."""
    on = summary["on"]  # acceptance over every drafter-on run, as the rates are
    return {
        **_measured("race", summary, prompt=prompt, options=options, engine=engine,
                    context_messages=context_messages, at=at, images=images),
        **ran_on(on["stats"] or summary["off"]["stats"]),  # the loop that ran, over the one asked for
        "block_size": options.draft_block_size,
        "block_history": on.get("block_history"), "chose": summary.get("chose"),  # what "auto" ran
        "runs": {"asked": runs, "measured": summary["runs"]},
        "off": {"tok_s": summary["off"]["tok_s"], "ttft_ms": summary["off"]["ttft_ms"],
                **ran_on(summary["off"]["stats"])},
        "on": {"tok_s": summary["on"]["tok_s"], "ttft_ms": summary["on"]["ttft_ms"], **ran_on(on["stats"])},
        "speedup": summary["speedup"],
        "ratios": summary["ratios"], "wins": summary["wins"], "confidence": summary["confidence"],
        "verdict": summary["verdict"],
        "acceptance": on["acceptance"], "acceptance_by_depth": on["acceptance_by_depth"],
        "mean_accepted": on["mean_accepted"],
        "identical": summary["identical"], "first_divergence": summary["first_divergence"],
        "command": bench_command(spec, engine, options, prompt, _repeat(runs, summary["runs"]),
                                 [1, options.draft_block_size], images),
    }


def build_sweep(summary: dict, *, prompt: str, options: GenerationOptions, engine: EngineInfo, spec: EngineSpec,
                blocks: list[int | str], runs: int, context_messages: int, at: float, images: list[dict] = ()) -> dict:
    """A block sweep's receipt, from its ``sweep_done`` frame: one row per draft block."""
    return {
        **_measured("sweep", summary, prompt=prompt, options=options, engine=engine,
                    context_messages=context_messages, at=at, images=images),
        **next((ran_on(row) for row in reversed(summary["rows"]) if "decode_loop" in row), {}),
        "blocks": sweep_order(blocks),
        "runs": {"asked": runs, "measured": min((row["runs"] for row in summary["rows"]), default=0)},
        "rows": summary["rows"],
        "best": summary["best"],
        "command": bench_command(spec, engine, options, prompt,
                                 _repeat(runs, min((row["runs"] for row in summary["rows"]), default=0)),
                                 sweep_order(blocks), images),
    }


def _repeat(asked: int | str, measured: int) -> int:
    """The runs a terminal repeats: as asked, or as many as runs "auto" took."""
    return asked if isinstance(asked, int) else max(measured, 1)


def bench_command(spec: EngineSpec, engine: EngineInfo, options: GenerationOptions, prompt: str, runs: int,
                  blocks: list[int | str], images: list[dict] = ()) -> str:
    """The ``specchat bench`` line that measures the same thing from a terminal; each image is named as the
    file to save it to (``image_file``)."""
    words = ["specchat", "bench"]
    if spec.name != "mlx":
        words += ["--engine", spec.name]
    if spec.base_url:
        words += ["--base-url", spec.base_url]
    if spec.model or spec.name == "mlx":
        words += ["--model", spec.model or engine.model]
    if spec.drafter:
        words += ["--drafter", spec.drafter]
    for image in images:
        words += ["--image", image_file(image)]
    words += ["--prompt", prompt, "--blocks", ",".join(map(str, blocks)), "--runs", str(runs),
              "--max-tokens", str(options.max_tokens), "--budget", str(options.reasoning_budget)]
    defaults = GenerationOptions()
    if options.temperature != defaults.temperature or options.top_p != defaults.top_p:
        words += ["--temperature", str(options.temperature), "--top-p", str(options.top_p)]
    if options.system_prompt != defaults.system_prompt:
        words += ["--system-prompt", options.system_prompt]
    if options.decode_loop != defaults.decode_loop:
        words += ["--loop", options.decode_loop]
    return shlex.join(words)


def image_file(image: dict) -> str:
    """The file name a receipt's command gives an image: its id and its kind's suffix."""
    return f"{image['id']}.{image['mime'].split('/')[-1].replace('jpeg', 'jpg')}"


def image_lines(receipt: dict) -> list[str]:
    """Which images every lane saw, and where to get each for the receipt's command."""
    images = receipt.get("images") or []
    if not images:
        return []
    return [f"Images: {len(images)}, the same for every lane; save each as the command names it: "
            + "; ".join(f"{i['width']}×{i['height']} {i['mime']} at /api/attachments/{i['id']} as {image_file(i)}"
                        for i in images), ""]


def _spread(s: dict | None, unit: str = "") -> str:
    return "–" if s is None else f"{s['median']}{unit} ({s['min']}–{s['max']})"


def _value(value, pattern: str = "{}") -> str:
    return "–" if value is None else pattern.format(value)


def pairs_text(judged: dict) -> str:
    """A race's or sweep row's pairs judged: "faster: 5 of 5 pairs faster, 94% interval 2.22–2.42×", or "–"
    before any pair (or in a receipt older than these fields)."""
    confidence, pairs = judged.get("confidence"), sum(r is not None for r in judged.get("ratios") or [])
    if not pairs or confidence is None:
        return "–"
    interval = f"{confidence['coverage']:.0%} interval {confidence['low']}–{confidence['high']}×"
    return f"{judged['verdict']}: {judged['wins']} of {pairs} pairs faster, {interval}"


def busy_lines(receipt: dict) -> list[str]:
    """The busy-machine warning as a paragraph, or nothing."""
    warning = describe(receipt.get("busy"))
    return [f"**{warning}**", ""] if warning else []


def markdown(receipt: dict) -> str:
    """A readable receipt: what was measured, then on what."""
    if receipt.get("kind") == "sweep":
        return sweep_markdown(receipt)
    off, on, machine_info, v = receipt["off"], receipt["on"], receipt["machine"], receipt["versions"]
    depth, divergence = receipt["acceptance_by_depth"], receipt["first_divergence"]
    identical = {True: "yes", False: "no", None: "–"}[receipt["identical"]]
    if divergence:
        identical += f" (first difference at character {divergence['index']}{_margin_words(divergence)})"
    earlier = f" (after {receipt['context_messages']} earlier messages)" if receipt["context_messages"] else ""
    lines = [
        f"# specchat race {receipt['id']}",
        "",
        f"{receipt['engine']} · {receipt['model']} · drafter {receipt['drafter'] or 'none'} · "
        f"block {receipt.get('chose') or receipt['block_size']} · {receipt['at']}",
        "",
        f"Prompt{earlier}: {receipt['prompt']!r}",
        "",
        *image_lines(receipt),
        *busy_lines(receipt),
        "| | drafter off | drafter on |",
        "|---|---|---|",
        f"| decode tok/s, median (min–max) | {_spread(off['tok_s'])} | {_spread(on['tok_s'])} |",
        f"| time to first token, ms | {_spread(off['ttft_ms'])} | {_spread(on['ttft_ms'])} |",
        "",
        "| | |",
        "|---|---|",
        f"| speed-up (on ÷ off, per pair) | {_spread(receipt['speedup'], '×')} |",
        f"| runs (pairs measured / asked) | {receipt['runs']['measured']} / {receipt['runs']['asked']} |",
        f"| verdict (sign test on the pairs) | {pairs_text(receipt)} |",
        f"| acceptance | {_value(receipt['acceptance'], '{:.1%}')} |",
        f"| acceptance by depth | {' · '.join(_value(a, '{:.0%}') for a in depth) if depth else '–'} |",
        f"| mean accepted per verify round | {_value(receipt['mean_accepted'])} |",
        f"| identical output | {identical} |",
        f"| decode loop | {_loop_words(receipt)} |",
        f"| sampling | temperature {receipt['sampling']['temperature']}, top-p {receipt['sampling']['top_p']} |",
        f"| reasoning budget · max tokens | {receipt['reasoning_budget']} · {receipt['max_tokens']} |",
        f"| finished | {receipt['finish_reason']} |",
        "",
        *_provenance(receipt),
    ]
    return "\n".join(lines)


def _margin_words(divergence: dict) -> str:
    """How near a tie the target's choice was where greedy lanes parted (``margin``), when it is known."""
    margin = divergence.get("margin")
    if margin is None:
        return ""
    if margin < NEAR_TIE:
        return f": a near-tie (margin {margin:.2g}) rounded differently; both continuations are greedy"
    return f", where the target's top two logits are {margin:.2f} apart"


def _loop_words(receipt: dict) -> str:
    """Which decode loop each lane ran on, and why where it was mlx-vlm's."""
    said = {lane: receipt[lane].get("decode_loop") for lane in ("off", "on")}
    words = " · ".join(f"{lane} {loop}" for lane, loop in said.items() if loop) or receipt["decode_loop"]
    return words + _reason(receipt.get("decode_loop_reason"))


def _reason(reason: str | None) -> str:
    return f" ({reason})" if reason else ""


def sweep_markdown(receipt: dict) -> str:
    """A sweep's receipt: a row per draft block (block 1 is the drafter off, the baseline), then on what."""
    identical = {True: "yes", False: "no", None: "–"}
    earlier = f" (after {receipt['context_messages']} earlier messages)" if receipt["context_messages"] else ""
    best = receipt["best"]
    lines = [
        f"# specchat block sweep {receipt['id']}",
        "",
        f"{receipt['engine']} · {receipt['model']} · drafter {receipt['drafter'] or 'none'} · {receipt['at']}",
        "",
        f"Prompt{earlier}: {receipt['prompt']!r}",
        "",
        *image_lines(receipt),
        *busy_lines(receipt),
        "| block | decode tok/s, median (min–max) | speed-up vs block 1 (min–max) | verdict (sign test) | "
        "acceptance | mean accepted per round | identical to block 1 |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in receipt["rows"]:
        speedup = row["speedup_range"] and {"median": row["speedup"], **row["speedup_range"]}
        name = row.get("chose") or str(row["block"])  # "auto (4)": what auto ran most
        block = f"**{name}** (best)" if row["block"] == best else name
        if row["block"] == 1:
            block += " drafter off"
        verdict = "–" if row["block"] == 1 else pairs_text(row)
        lines.append(f"| {block} | {_spread(row['tok_s'])} | {_spread(speedup, '×')} | {verdict} | "
                     f"{_value(row['acceptance'], '{:.1%}')} | {_value(row['mean_accepted'])} | "
                     f"{identical[row['identical']]} |")
    lines += [
        "",
        f"Runs per block (measured / asked): {receipt['runs']['measured']} / {receipt['runs']['asked']}. "
        f"Sampling: temperature {receipt['sampling']['temperature']}, top-p {receipt['sampling']['top_p']}. "
        f"Reasoning budget {receipt['reasoning_budget']}, max tokens {receipt['max_tokens']}. "
        f"Decode loop: {receipt['decode_loop']}{_reason(receipt.get('decode_loop_reason'))}. "
        f"Finished: {receipt['finish_reason']}.",
        "",
        *_provenance(receipt),
    ]
    return "\n".join(lines)


def _provenance(receipt: dict) -> list[str]:
    """The machine, the versions and the command that measures it again."""
    machine_info, v = receipt["machine"], receipt["versions"]
    return [
        f"Machine: {machine_info['cpu']}, {machine_info['cores']} cores, {machine_info['os']}; "
        f"accelerator {machine_info['accelerator'] or 'none'}; BLAS: {machine_info['blas']}.",
        f"Versions: specchat {v['specchat']}, mlx {v['mlx']}, mlx-vlm {v['mlx-vlm']}.",
        "",
        "Reproduce from a terminal:",
        "",
        "```sh",
        receipt["command"],
        "```",
        "",
    ]
