"""A tool call's cost to the reply: the time from the moment the engine has parsed a call to the first token the
tab receives after the call's result, less the tool's own run time (bar: under 50 ms), with drafting off, at
block 4 and with ``auto``, runs interleaved; and the acceptance inside tool calls against the rest of the reply.

    python -m benchmarks.tool_latency [--model DIR] [--question TEXT] [--runs N]

The chat runs through the real web app (in this process, on 127.0.0.1) with the calculator always allowed. Each
run is a new conversation whose message holds some notes before the question: with the tools' descriptions the
prompt is about 1,650 tokens on the default model, so a step that prefilled it all again instead of only the
result would show. The default model is a tiny checkpoint whose weights script its replies
(tests/support/tool_model.py): asked "What is 2+3?" it thinks, calls the calculator, and answers from the result;
``--model`` takes any checkpoint whose template renders tools and that calls one when asked ``--question``.

How to read it. The call is parsed on the engine's thread (its ``ToolCall`` event); the first token is the first
thinking or answer frame after the ``tool_result`` frame, as the client reads it off the socket. The row splits
that time (medians, so the parts need not add up exactly):

- the call's step ends: from the call to that step's end (the model's stop token after the call, its numbers);
- the tool loop: from that end to the next step's start, less the tool (the call's frames and storing it, the
  next turn handed to the engine's thread);
- to the first text: from the next step's start to the engine's first text, made of the prompt (the cached ids
  extended by the result), its prefill (only the result and the template's text around it when the
  conversation's cache is reused: the tokens are given) and what comes after it: the prefill gives the first
  token, whose text goes out with it (engines/mlx/detokenizer.py), so this part is near nothing unless that token
  makes no text (markup, half a character);
- to the tab: from the engine's first text to the frame the client reads.

Below the table, the prefill of the call's own step (the whole message, cold): what the next step would pay
again were the cache not reused. The acceptance table gives ``tool_acceptance`` (the draft rounds that made call
markup), the rest of the reply's rounds, and ``acceptance`` (every round), summed over both steps as the done
frame gives them; the scripted model's drafter knows the call's tokens only, so its numbers show the split, not
what a trained model keeps.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from benchmarks.figures import spread

BAR_MS = 50.0
QUESTION = "What is 2+3?"
# About 500 tokens under the scripted model's tokenizer (some 200 under a real model's).
NOTES = "Notes from the planning meeting: we went over the budget, the schedule and who owns each task. " * 10
SETTINGS = {"reasoning_budget": 64, "max_tokens": 64, "temperature": 0.0, "tools": True}
MODES = {"off": {"speculative": False}, "block 4": {"speculative": True, "draft_block_size": 4},
         "auto": {"speculative": True, "draft_block_size": "auto"}}
TOKEN_FRAMES = ("thinking", "answer")


def timed_engine(model: str):
    """The MLX engine, noting when each of its steps starts and when it emits each event, on its own thread."""
    from engines.mlx import MlxEngine

    class TimedEngine(MlxEngine):
        def __init__(self, path: str):
            super().__init__(path)
            self.steps: list[list[tuple[float, object]]] = []  # per step: (start, None), then (time, event)

        def _generate(self, turn, emit) -> None:
            # Where the engine's thread emits: a call is parsed here, before any queue or frame carries it.
            marks = [(time.perf_counter(), None)]
            self.steps.append(marks)

            def noted(event) -> None:
                marks.append((time.perf_counter(), event))
                emit(event)

            super()._generate(turn, noted)

    return TimedEngine(model)


@dataclass
class Run:
    """One run's numbers (ms): the measure, and the parts that explain it."""

    latency: float  # call parsed → first token frame after its result, less the tool
    finish: float  # call parsed → its step's end
    loop: float  # its step's end → the next step's start, less the tool
    first: float  # the next step's start → its first text out of the engine: prompt + prefill + after
    prompt: float  # the next step's prompt (the result's ids after the cached ones)
    prefill: float
    after: float  # the prefill's end → the first text out of the engine
    new_tokens: int  # the tokens the next step prefilled
    prompt_tokens: int
    deliver: float  # the engine's first text → the frame the client reads
    tool: float
    cold_tokens: int  # what the call's own step prefilled, and in how long
    cold_prefill: float
    stats: dict  # the done frame's


def one_run(ws, engine, n: int, text: str) -> Run:
    """One reply in a new conversation; the first step that made calls and the step after it are measured."""
    from engines import Answer, Done, Thinking, ToolCall

    ws.send({"type": "new_chat"})
    ws.until("new_chat")
    engine.steps.clear()
    ws.send({"type": "chat", "id": f"r{n}", "text": text})
    results, first_frame, tool = [], None, 0.0
    while True:
        frame = ws.recv(timeout=300)
        if frame["type"] == "tool_result":
            results.append(frame["ms"])
        elif frame["type"] in TOKEN_FRAMES and results and first_frame is None:
            first_frame = time.perf_counter()
            tool = sum(results)  # the results before the first token: those of the measured step's calls
        elif frame["type"] == "done":
            done = frame
            break
    called = next((i for i, step in enumerate(engine.steps) if any(isinstance(e, ToolCall) for _, e in step)), None)
    if called is None or first_frame is None or called + 1 >= len(engine.steps):
        raise RuntimeError(f"no call with a step after it (finish: {done['finish_reason']}, "
                           f"{done.get('error') or 'no error'}): --model must call a tool when asked --question")
    step, after = engine.steps[called], engine.steps[called + 1]
    parsed = max(t for t, e in step if isinstance(e, ToolCall))  # the step's last call: its results run together
    ended, step_done = next((t, e) for t, e in step if isinstance(e, Done))
    started = after[0][0]
    token = next(t for t, e in after if isinstance(e, (Thinking, Answer)))
    next_ended, next_done = next((t, e) for t, e in after if isinstance(e, Done))
    s, c = next_done.stats, step_done.stats
    # The engine's meter starts once the prompt's ids are known; its elapsed time ends just before its Done.
    metered = next_ended - s["elapsed_ms"] / 1000
    prefill = s["prefill_ms"] or 0.0
    return Run(latency=(first_frame - parsed) * 1000 - tool, finish=(ended - parsed) * 1000,
               loop=(started - ended) * 1000 - tool, first=(token - started) * 1000,
               prompt=(metered - started) * 1000, prefill=prefill, after=(token - metered) * 1000 - prefill,
               new_tokens=s["prompt_tokens"] - s["cached_tokens"], prompt_tokens=s["prompt_tokens"],
               deliver=(first_frame - token) * 1000, tool=tool,
               cold_tokens=c["prompt_tokens"] - c["cached_tokens"], cold_prefill=c["prefill_ms"] or 0.0,
               stats=done["stats"])


def asked(n: int, question: str) -> str:
    """Run ``n``'s message: a different first word each run, so that no run's prompt is a prefix another cached."""
    return f"Run {n}. {NOTES}\n\n{question}"


def median(runs: list[Run], field: str) -> float:
    return statistics.median(getattr(r, field) for r in runs)


def rest_acceptance(stats: dict) -> float | None:
    """The acceptance of the rounds that made no call markup."""
    drafted = (stats.get("drafted") or 0) - (stats.get("tool_drafted") or 0)
    return ((stats.get("accepted") or 0) - (stats.get("tool_accepted") or 0)) / drafted if drafted > 0 else None


def shown(values: list[float | None]) -> str:
    """An acceptance's median (min-max) over the runs that drafted (auto may not draft at all in a run)."""
    known = [v for v in values if v is not None]
    if not known:
        return "-"
    return spread(known, 3) + ("" if len(known) == len(values) else f" in {len(known)} of {len(values)} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model folder (default: a freshly built checkpoint that scripts a call)")
    parser.add_argument("--question", default=QUESTION, help="what the model is asked, after the notes")
    parser.add_argument("--runs", type=int, default=9, help="runs per mode")
    args = parser.parse_args()
    from webapp.blas import blas_in_use, ensure_fast_blas
    from webapp.precision import keep_float32_exact

    keep_float32_exact()
    ensure_fast_blas(None, sys.argv[1:], module="benchmarks.tool_latency")
    from engines.block_policy import AUTO, BLOCKS, add_histories, block_label
    from tests.support.servers import LiveServer
    from tests.support.wsclient import WsClient, set_settings
    from webapp.measurement.machine import machine

    with tempfile.TemporaryDirectory(prefix="specchat-bench-") as work:
        model = args.model
        if model is None:
            from tests.support.tool_model import build_tool_checkpoint

            model = str(build_tool_checkpoint(Path(work) / "tiny-tools"))
        print(f"machine: {machine()}")
        import mlx.core  # noqa: F401  (maps the BLAS library)

        print(f"model: {model}; BLAS: {blas_in_use()}; settings: {SETTINGS}; question: {args.question!r} after "
              f"{len(NOTES)} characters of notes")
        engine = timed_engine(model)
        server = LiveServer(engine, Path(work) / "data")
        try:
            if engine.info().state != "ready":
                raise RuntimeError(f"the model did not load: {engine.info()}")
            requests.patch(f"{server.url}/api/tools/builtin/calculator", json={"always_allow": True},
                           timeout=10).raise_for_status()
            with WsClient(server.ws_url) as ws:
                set_settings(ws, **SETTINGS)
                # Rehearsal: each mode once as measured, and every block auto may pick, whose first round compiles
                # its steps (the question alone: a block's steps do not depend on the prompt's length).
                others = [{"speculative": True, "draft_block_size": b} for b in BLOCKS if b != 4]
                for n, values in enumerate([*others, *MODES.values()]):
                    set_settings(ws, **values)
                    one_run(ws, engine, -1 - n, asked(-1 - n, args.question) if n >= len(others) else args.question)
                runs: dict[str, list[Run]] = {mode: [] for mode in MODES}
                order = list(MODES)
                for n in range(args.runs):
                    for mode in order[n % len(order):] + order[:n % len(order)]:
                        set_settings(ws, **MODES[mode])
                        runs[mode].append(one_run(ws, engine, n, asked(n, args.question)))
        finally:
            server.stop()
            engine.unload()

    print(f"\ncall parsed → first token frame after its result, less the tool's own time (ms; median (min-max) of "
          f"{args.runs} runs per mode, modes interleaved; bar: under {BAR_MS:.0f} ms); its parts, medians")
    print("mode | call → first token − tool | under the bar | the call's step ends | the tool loop | to the first "
          "text: prompt + prefill (tokens) + after it | to the tab | tool")
    labels = {mode: block_label(AUTO, add_histories(r.stats.get("block_history") for r in measured))
              if MODES[mode].get("draft_block_size") == AUTO else mode for mode, measured in runs.items()}
    for mode, measured in runs.items():
        latency = [r.latency for r in measured]
        verdict = "yes" if statistics.median(latency) < BAR_MS else "NO"
        print(f"{labels[mode]} | {spread(latency, 1)} | {verdict} | {median(measured, 'finish'):.1f} | "
              f"{median(measured, 'loop'):.1f} | {median(measured, 'first'):.1f}: {median(measured, 'prompt'):.1f} + "
              f"{median(measured, 'prefill'):.1f} ({median(measured, 'new_tokens'):.0f} new of "
              f"{median(measured, 'prompt_tokens'):.0f}) + {median(measured, 'after'):.1f} | "
              f"{median(measured, 'deliver'):.1f} | {median(measured, 'tool'):.1f}")
    every = [r for measured in runs.values() for r in measured]
    print(f"the call's own step, cold: prefilled {median(every, 'cold_tokens'):.0f} tokens in "
          f"{median(every, 'cold_prefill'):.1f} ms (median of every run): what the next step would pay again "
          "without the conversation's cache")

    print("\nacceptance (both steps summed; median (min-max)) | inside tool calls (tool_acceptance) | the rest | "
          "every round (acceptance)")
    for mode, measured in runs.items():
        if not MODES[mode]["speculative"]:
            continue
        stats = [r.stats for r in measured]
        print(f"{labels[mode]} | {shown([s.get('tool_acceptance') for s in stats])} | "
              f"{shown([rest_acceptance(s) for s in stats])} | {shown([s.get('acceptance') for s in stats])}")


if __name__ == "__main__":
    sys.exit(main())
