"""One prompt under several settings ("lanes") on one engine, one reply at a time, interleaved, then tallied.

A race is two lanes (drafter off and on), a block sweep one lane per draft
block, and ``specchat bench`` the same from a terminal: all run here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from engines import Answer, Done, Engine, EngineError, GenerationOptions, Message, Thinking, Turn, guarded
from engines.block_policy import add_histories, block_label
from engines.cancel import Relay

from ..conversations.frames import done_frame, reply_frame
from .measures import divergence, pooled_depths, ratios, spread
from .pairs import judged


@dataclass(frozen=True)
class Lane:
    key: str | int  # "off"/"on" in a race, the draft block in a sweep
    tag: dict  # fields every frame of this lane carries, e.g. {"lane": "on"} or {"block": 3}
    options: GenerationOptions


def block_lane(block: int | str, options: GenerationOptions) -> Lane:
    """Block 1 is the drafter off; block k drafts k−1 tokens per verify round; "auto" lets the engine pick."""
    values = {"speculative": False} if block == 1 else {"speculative": True, "draft_block_size": block}
    return Lane(block, {"block": block}, options.updated(values))


def sweep_order(blocks: list[int | str]) -> list[int | str]:
    """Draft blocks smallest first, "auto" after the fixed ones."""
    return sorted(blocks, key=lambda block: (block == "auto", 0 if block == "auto" else block))


@dataclass
class LaneRun:
    """One lane's reply in one run, for one of the prompts."""

    lane: Lane
    run: int
    prompt: int
    answer: str = ""
    thinking: str = ""
    finish_reason: str = "cancelled"
    stats: dict = field(default_factory=dict)
    error: dict | None = None

    @property
    def complete(self) -> bool:
        return self.finish_reason in ("stop", "length")


def schedule(lanes: list[Lane], runs: int, prompts: int = 1, rotate: bool = True) -> list[tuple[int, int, Lane]]:
    """(run, prompt, lane) in order: each run does every lane once per prompt, and the order turns by
    one lane each run (off, on, on, off, …), so no lane always goes first on a drifting machine; without
    ``rotate`` every run keeps the lanes' order."""
    order = []
    for run in range(runs):
        turn = run % len(lanes) if rotate else 0
        for prompt in range(prompts):
            order += [(run, prompt, lane) for lane in lanes[turn:] + lanes[:turn]]
    return order


class LaneReply:
    """One lane's reply as its own engine conversation, so no lane reuses another's cache."""

    recorded = True

    def __init__(self, engine: Engine, id: str, lane: Lane, run: int, prompt: int, messages: list[Message]):
        self.engine = engine
        self.result = LaneRun(lane, run, prompt)
        self.tag = {"id": id, **lane.tag, "run": run}
        self.turn = Turn(id, f"lane-{uuid.uuid4().hex}", messages, lane.options)
        self.events = None
        self.started = 0.0

    def open(self, cancel: Relay) -> None:
        """Start generating (raises EngineError when the engine cannot, e.g. busy or not ready)."""
        cancel.follow(self.turn.cancel)
        self.started = time.perf_counter()
        self.events = self.engine.stream(self.turn)

    def close(self) -> None:
        """Give up an opened lane that will not be played: the engine is free again at once."""
        if self.events is not None:
            self.events.close()

    def play(self, emit: Callable[[dict], None]) -> LaneRun:
        """Emit the reply's frames (deltas with ``t_ms`` since the lane started) and record how it went."""
        result, said = self.result, {Thinking: [], Answer: []}
        emit({"type": "start", **self.tag})
        try:
            for event in guarded(self.events):
                frame = reply_frame(event, self.tag)
                if isinstance(event, (Thinking, Answer)):
                    said[type(event)].append(event.text)
                    frame["t_ms"] = round((time.perf_counter() - self.started) * 1000.0, 1)
                elif isinstance(event, Done):
                    result.finish_reason, result.stats = event.finish_reason, event.stats
                    result.error = frame.get("error")
                emit(frame)
        finally:
            self.engine.forget(self.turn.conversation_id)
        result.answer, result.thinking = "".join(said[Answer]), "".join(said[Thinking])
        return result

    def fail(self, exc: EngineError, emit: Callable[[dict], None]) -> LaneRun:
        """The lane could not start: its frames say why, as a reply's would."""
        emit({"type": "start", **self.tag})
        emit(done_frame(Done("error", error_code=exc.code, error_message=exc.message), self.tag))
        self.result.finish_reason, self.result.error = "error", {"code": exc.code, "message": exc.message}
        return self.result


class WarmUp(LaneReply):
    """The prompt prefilled once before the lanes and dropped at its first token, unrecorded: every lane then
    finds it in the prefix cache alike, where otherwise only the first would pay for a cold prompt."""

    recorded = False

    def play(self, emit: Callable[[dict], None]) -> LaneRun:
        def first_token(frame: dict) -> None:
            if frame["type"] in ("thinking", "answer"):
                self.turn.cancel.set()

        return super().play(first_token)


class Rehearsal(LaneReply):
    """A lane played once before the measured runs, unrecorded and unseen, so no run pays for compiling
    the lane's steps (on a GPU a lane's first reply can be ten times slower)."""

    recorded = False

    def play(self, emit: Callable[[dict], None]) -> LaneRun:
        return super().play(lambda frame: None)


def run_lanes(replies: list[LaneReply], cancel: Relay, emit: Callable[[dict], None],
              enough: Callable[[list[LaneRun]], bool] = lambda results: False) -> list[LaneRun]:
    """Play the replies one after another (the first may be opened already); stop at a cancel or an error,
    or once ``enough`` says so of the results at the end of a run (runs "auto")."""
    results = []
    for i, reply in enumerate(replies):
        if cancel.is_set():
            break
        if i and reply.recorded and replies[i - 1].recorded and reply.result.run != replies[i - 1].result.run \
                and enough(results):
            break
        if reply.events is None:
            try:
                reply.open(cancel)
            except EngineError as exc:
                results.append(reply.fail(exc, emit))
                break
        result = reply.play(emit)
        if reply.recorded or result.error:
            results.append(result)
        if result.error:
            break
    return results


@dataclass
class Tally:
    """A lane's numbers over its complete runs; speed-up and identity pair each run with the baseline lane's."""

    lane: Lane
    runs: int
    pairs: int  # runs that have a complete baseline run to compare with
    tok_s: dict | None
    ttft_ms: dict | None
    speedup: dict | None
    acceptance: float | None
    acceptance_by_depth: list | None
    mean_accepted: float | None
    block_history: dict[str, int] | None  # rounds per block over the complete runs (what "auto" chose)
    identical: bool | None
    divergence: tuple[int, str, str] | None  # (index, baseline's excerpt, this lane's) of the first pair that differs
    stats: dict | None  # the last complete run's final stats
    ratios: list[float | None]  # each pair's speed-up, in run order
    wins: int  # pairs this lane was faster in
    confidence: dict | None  # {low, high, coverage}: the interval for the median speed-up (pairs.py)
    verdict: str  # "faster", "slower" or "unclear"

    def judged(self) -> dict:
        """The pairs' fields a race summary, a sweep row and a bench row carry."""
        return {"ratios": self.ratios, "wins": self.wins, "confidence": self.confidence, "verdict": self.verdict}

    def row(self) -> dict:
        """The sweep and bench table row."""
        return {
            "block": self.lane.key, "runs": self.runs, "tok_s": self.tok_s, "ttft_ms": self.ttft_ms,
            "speedup": self.speedup and self.speedup["median"],
            "speedup_range": self.speedup and {"min": self.speedup["min"], "max": self.speedup["max"]},
            "acceptance": self.acceptance, "mean_accepted": self.mean_accepted, "identical": self.identical,
            "block_history": self.block_history, "chose": block_label(self.lane.key, self.block_history),
            **self.judged(),
            **ran_on(self.stats),
        }


def ran_on(stats: dict | None) -> dict:
    """``decode_loop`` and ``decode_loop_reason`` of a run's stats (the MLX engine's), else nothing."""
    return {key: stats[key] for key in ("decode_loop", "decode_loop_reason") if key in (stats or {})}


def tally(results: list[LaneRun], lane: Lane, baseline: Lane) -> Tally:
    mine = {(r.run, r.prompt): r for r in results if r.lane == lane and r.complete}
    base = {(r.run, r.prompt): r for r in results if r.lane == baseline and r.complete}
    pairs = sorted(k for k in mine if k in base)
    runs = [mine[k] for k in sorted(mine)]
    drafted = sum(r.stats.get("drafted") or 0 for r in runs)
    accepted = sum(r.stats.get("accepted") or 0 for r in runs)
    rounds = sum(r.stats.get("rounds") or 0 for r in runs)
    differ = next((d for d in (divergence(base[k].answer, mine[k].answer) for k in pairs) if d), None)
    speedups = ratios([mine[k].stats.get("tok_s") for k in pairs], [base[k].stats.get("tok_s") for k in pairs])
    return Tally(
        lane=lane,
        runs=len(runs),
        pairs=len(pairs),
        tok_s=spread([r.stats.get("tok_s") for r in runs]),
        ttft_ms=spread([r.stats.get("ttft_ms") for r in runs]),
        speedup=spread(speedups, digits=3),
        acceptance=round(accepted / drafted, 4) if drafted else None,
        acceptance_by_depth=pooled_depths([(r.stats.get("acceptance_by_depth"), r.stats.get("rounds")) for r in runs]),
        mean_accepted=round(accepted / rounds, 3) if rounds else None,
        block_history=add_histories(r.stats.get("block_history") for r in runs),
        identical=differ is None if pairs else None,
        divergence=differ,
        stats=runs[-1].stats if runs else None,
        ratios=[None if r is None else round(r, 3) for r in speedups],
        **judged(speedups),
    )


def outcome(results: list[LaneRun], cancel: Relay) -> tuple[str, dict | None]:
    """How the whole contest ended: ``stop``, ``cancelled`` or ``error`` (with the failing lane's error)."""
    failed = next((r for r in results if r.finish_reason == "error"), None)
    if failed is not None:
        return "error", failed.error
    if cancel.is_set() or any(r.finish_reason == "cancelled" for r in results):
        return "cancelled", None
    return "stop", None
