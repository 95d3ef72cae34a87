"""Races (drafter off against on) and block sweeps in a tab's conversation, each ending in one summary frame.

Both are lanes run one after another on the one engine (``lanes.py``): a race
is a sweep over two lanes. The engine is held for the contest (other tabs get
``busy``) so no other reply slips in between lanes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from engines import Engine, EngineBusy, EngineError, GenerationOptions, Message
from engines.block_policy import block_label
from engines.cancel import Relay

from ..conversations.conversation import Conversation, Said, new_message, produced_by
from ..errors import ClientError
from .busy import CpuWatch
from .contest import ContestHost, RaceAsked, SweepAsked
from .lanes import (Lane, LaneReply, LaneRun, Tally, WarmUp, block_lane, outcome, run_lanes, schedule,
                    sweep_order, tally)
from .pairs import AUTO_MAX_PAIRS, settled

log = logging.getLogger(__name__)
API_POLL_S = 0.05  # how often a contest that waits for an API request looks whether the model came free
# The summary of a contest that broke off unexpectedly: its frame still comes, with this error.
BROKE_OFF = {"code": "internal",
             "message": "The contest broke off unexpectedly (specchat's log says why): run it again."}


@dataclass
class Contest:
    id: str
    cancel: Relay


def race_lanes(options: GenerationOptions) -> list[Lane]:
    return [Lane("off", {"lane": "off"}, options.updated({"speculative": False})),
            Lane("on", {"lane": "on"}, options.updated({"speculative": True}))]


def planned(runs: int | str) -> int:
    """Runs to schedule: as asked, or for "auto" as many as it may take."""
    return AUTO_MAX_PAIRS if runs == "auto" else runs


def enough_pairs(runs: int | str, lanes: list[Lane]) -> Callable[[list[LaneRun]], bool]:
    """For runs "auto": whether every drafting lane's pairs with the first lane settle it (pairs.py)."""
    if runs != "auto":
        return lambda results: False
    return lambda results: all(settled(tally(results, lane, lanes[0]).ratios) for lane in lanes[1:])


def contest_options(host: ContestHost, greedy: bool) -> GenerationOptions:
    """The current settings, greedy unless the client asked to sample as set."""
    options = host.settings.current
    return options.updated({"temperature": 0.0}) if greedy else options


def start_race(host: ContestHost, conversation: Conversation, frame: RaceAsked) -> None:
    options, info, spec = contest_options(host, frame.greedy), host.engine.info(), host.spec
    if info.drafter is None:
        raise ClientError("no_drafter", "This engine has no drafter, so there is nothing to race: load one "
                          "(specchat --drafter, or a model with an MTP head) and race again.")
    parent = conversation.parent_for(frame.parent, frame.parent_given)
    started_at, context = time.time(), conversation.context_messages(parent)
    images = described(host, frame.images)

    def summarize(results: list[LaneRun], cancel: Relay, busy: dict | None, messages: list[Message]) -> dict:
        off, on = (tally(results, lane, lanes[0]) for lane in lanes)
        finish, error = outcome(results, cancel)
        summary = race_summary(frame.id, finish, error, off, on, busy, options.draft_block_size)
        if summary["first_divergence"] and options.temperature == 0.0:
            summary["first_divergence"]["margin"] = divergence_margin(host.engine, results, lanes, messages)
        summary["receipt"] = host.receipts.record(
            summary, prompt=frame.text, options=options, engine=info, spec=spec, runs=frame.runs,
            context_messages=context, at=started_at, images=images,
        )
        if off.tok_s is not None:
            host.baselines.put(info, off.tok_s["median"], "race", spread=off.tok_s,
                               prompt_tokens=off.stats.get("prompt_tokens"), busy=busy)
            host.broadcast_engine()
        return summary

    def broke_off() -> dict:
        return race_summary(frame.id, "error", BROKE_OFF, *(tally([], lane, lanes[0]) for lane in lanes), None,
                            options.draft_block_size)

    lanes = race_lanes(options)
    # Every pair runs the drafter off first: the room watches the drafter-on lane live beside the recording of
    # the pair's off lane, as the race is shown (a sweep, watched as a chart, turns its order instead).
    _run(host, conversation, frame.id, frame.text, frame.images, lanes, frame.runs, lanes[1], summarize, broke_off,
         parent, rotate=False)


def start_sweep(host: ContestHost, conversation: Conversation, frame: SweepAsked) -> None:
    options, info, spec = contest_options(host, frame.greedy), host.engine.info(), host.spec
    if info.drafter is None and any(block != 1 for block in frame.blocks):
        raise ClientError("no_drafter", "This engine has no drafter: only block 1 (drafting off) can run. "
                          "Load one (specchat --drafter) or sweep blocks [1].")
    parent = conversation.current
    started_at, context = time.time(), conversation.context_messages(parent)
    images = described(host, frame.images)

    def sweep_summary(results: list[LaneRun], finish: str, error: dict | None, busy: dict | None) -> dict:
        """The ``sweep_done`` frame."""
        rows = [tally(results, lane, lanes[0]).row() for lane in lanes]
        measured = [row for row in rows if row["tok_s"] is not None]
        best = max(measured, key=lambda row: row["tok_s"]["median"])["block"] if measured else None
        summary = {"type": "sweep_done", "id": frame.id, "finish_reason": finish, "runs": frame.runs,
                   "rows": rows, "best": best, "busy": busy}
        if error:
            summary["error"] = error
        return summary

    def summarize(results: list[LaneRun], cancel: Relay, busy: dict | None, messages: list[Message]) -> dict:
        summary = sweep_summary(results, *outcome(results, cancel), busy)  # a sweep weighs no divergence
        summary["receipt"] = host.receipts.record_sweep(
            summary, prompt=frame.text, options=options, engine=info, spec=spec, blocks=frame.blocks,
            runs=frame.runs, context_messages=context, at=started_at, images=images,
        )
        return summary

    lanes = [block_lane(block, options) for block in sweep_order(frame.blocks)]  # block 1, the baseline, first
    _run(host, conversation, frame.id, frame.text, frame.images, lanes, frame.runs, lanes[-1], summarize,
         lambda: sweep_summary([], "error", BROKE_OFF, None), parent)


def described(host: ContestHost, ids: list[str]) -> list[dict]:
    """The contest's images as its receipt names them, in order (an unknown id is refused later, named)."""
    found = host.conversations.store.attachments(ids, data=False)
    return [found[id] for id in ids if id in found]


def race_summary(id: str, finish: str, error: dict | None, off: Tally, on: Tally, busy: dict | None,
                 block_size: int | str) -> dict:
    """The ``race_done`` frame: ``busy`` is how much of the CPU went to other work meanwhile (busy.py)."""
    summary = {
        "type": "race_done", "id": id, "finish_reason": finish, "runs": on.pairs,
        "off": {"tok_s": off.tok_s, "ttft_ms": off.ttft_ms, "stats": off.stats},
        "on": {"tok_s": on.tok_s, "ttft_ms": on.ttft_ms, "stats": on.stats, "acceptance": on.acceptance,
               "acceptance_by_depth": on.acceptance_by_depth, "mean_accepted": on.mean_accepted,
               "block_history": on.block_history},
        "speedup": on.speedup, "identical": on.identical,
        "first_divergence": on.divergence and dict(zip(("index", "off", "on"), on.divergence)),
        **on.judged(), "busy": busy, "block_size": block_size, "chose": block_label(block_size, on.block_history),
    }
    if error:
        summary["error"] = error
    return summary


def divergence_margin(engine: Engine, results: list[LaneRun], lanes: list[Lane],
                      messages: list[Message]) -> float | None:
    """The target's logit margin where the first pair whose answers differ parts (in run order, as
    ``first_divergence``), in the drafter-off lane's context: one forward on the engine's model thread."""
    complete = {(r.run, r.prompt, r.lane.key): r for r in results if r.complete}
    for (run, prompt, lane), on in sorted(complete.items(), key=lambda item: item[0][:2]):
        off = complete.get((run, prompt, "off"))
        if lane == "on" and off is not None and off.answer != on.answer:
            said = (Message("assistant", reply.answer, reply.thinking) for reply in (off, on))
            return engine.divergence_margin(messages, lanes[0].options, *said)
    return None


def _wait_for_the_api(host: ContestHost, warm_up: WarmUp, cancel: Relay) -> None:
    """Open the warm-up once the API's request in flight is done (run_lanes opens it if the wait is cancelled
    or another error comes, and reports that)."""
    while not cancel.is_set():
        try:
            warm_up.open(cancel)
            return
        except EngineBusy:
            cancel.wait(API_POLL_S)
        except EngineError:
            return


def _run(host: ContestHost, conversation: Conversation, id: str, text: str, images: list[str], lanes: list[Lane],
         runs: int | str,
         kept: Lane, summarize: Callable[[list[LaneRun], Relay, dict | None, list[Message]], dict],
         broke_off: Callable[[], dict],
         parent: str | None, rotate: bool = True) -> None:
    """Hold the engine, start the warm-up here (so a busy or loading engine is an error frame, not a
    failed race), then play every lane in the conversation (runs "auto": until the pairs settle it) and
    end with ``summarize``'s frame, or ``broke_off``'s if anything fails unexpectedly: one summary frame
    either way. The text (with its images) is stored after ``parent`` with ``kept``'s last answer as its reply, as a chat's
    would be; every frame carries that reply's ``message`` id."""
    if conversation.job is not None:
        raise ClientError("busy", "A reply is still streaming in this tab: stop it or wait, then race again.")
    if not (host.yield_calibration() and host.exclusive.acquire(blocking=False)):
        raise ClientError("busy", "A race or sweep is running: wait for it to finish, then try again.")
    opened = None  # the warm-up, once it holds the engine
    try:
        said = new_message("user", parent, text, images=images)
        messages, window = conversation.fitted(parent, lanes[0].options, said)
        replies = [WarmUp(host.engine, id, lanes[0], 0, 0, messages)]
        replies += [LaneReply(host.engine, id, lane, run, prompt, messages)
                    for run, prompt, lane in schedule(lanes, planned(runs), rotate=rotate)]
        cancel = Relay()
        try:
            replies[0].open(cancel)
            opened = replies[0]
        except EngineBusy:
            if not host.api.state()["answering"]:
                raise ClientError("busy", "A reply is being generated: wait for it, then race again.") from None
            # An API request holds the model: the contest waits for it (work), and later requests wait for the
            # contest, which holds the exclusive lock.
        except EngineError as exc:
            raise ClientError(exc.code, exc.message) from None
        reply = new_message("assistant", said["id"], settings=produced_by(host.engine.info(), kept.options))
    except BaseException:  # work never runs, so nothing else lets the engine and the lock go
        if opened is not None:
            opened.close()
        host.exclusive.release()
        raise

    def tagged(frame: dict) -> dict:
        """A lane's frame with the stored reply it writes to, as a chat reply's frames carry it."""
        if frame["type"] == "start":  # with what a reloaded tab needs to draw the contest again
            return {**frame, "message": reply["id"], "parent": said["id"], "runs": runs,
                    "dropped_turns": window.dropped}
        return {**frame, "message": reply["id"]}

    def work() -> Said:
        try:
            if opened is None:
                _wait_for_the_api(host, replies[0], cancel)
            watch = CpuWatch()
            results = run_lanes(replies, cancel, lambda frame: conversation.emit(tagged(frame)),
                                enough_pairs(runs, lanes))
            summary = {**summarize(results, cancel, watch.result(), messages), "message": reply["id"]}
            shown = next((r for r in reversed(results) if r.lane == kept), None)
            if shown is None:
                return Said(finish_reason=summary["finish_reason"], last=summary)
            stats = {**shown.stats, "error": shown.error} if shown.error else shown.stats
            return Said(shown.answer, shown.thinking, shown.finish_reason, stats, summary)
        except Exception:
            log.exception("contest %s broke off", id)
            return Said(finish_reason="error", last={**broke_off(), "message": reply["id"]})
        finally:
            host.exclusive.release()

    try:
        conversation.begin(Contest(id, cancel), [said, reply], work)
    except BaseException:  # refused (shutting down): the opened lane and the engine are let go, work never runs
        replies[0].close()
        host.exclusive.release()
        raise
