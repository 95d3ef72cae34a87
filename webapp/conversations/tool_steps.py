"""A reply that calls tools: the engine's steps and, between them, the calls the model made, each approved, run
and answered in order, until the model answers without a call.

The reply's frames say what happens as it goes (``tool_call`` at each change of a call's state, ``tool_result``
with its outcome), and its stored message keeps the calls with where in its text each happened (``at``), so the
page draws thinking, calls and answer in the order they came. Stop ends everything at once: a wait for approval,
a running tool and the engine's step alike.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from engines import Answer, Done, Engine, EngineBusy, EngineError, Message, Stats, Thinking, ToolCall, Turn, guarded
from engines.cancel import Relay

from ..tools.results import ToolResult, ToolSpec, text_part
from .store import new_id
from .tool_message import tool_message

log = logging.getLogger(__name__)
DECISIONS = ("once", "always", "deny")
BUSY_POLL_S = 0.05  # how often a step waits for the engine that another caller took between two steps
SUMMED = ("tokens", "thinking_tokens", "answer_tokens", "drafted", "accepted", "rounds", "thinking_ms", "tool_drafted",
          "tool_accepted")
FUNCTION_NAME_LIMIT = 64  # what OpenAI-style function names may hold


@dataclass(frozen=True)
class Offer:
    """The tools a reply offers the model, by the function name the model sees; a name two servers share is
    given with its server's (``server__name``), so a call always goes to the server that offered it."""

    tools: dict[str, ToolSpec]

    @classmethod
    def of(cls, specs: list[ToolSpec]) -> Offer:
        shared = {spec.name for spec in specs if sum(s.name == spec.name for s in specs) > 1}
        named = {}
        for spec in specs:
            name = f"{spec.server}__{spec.name}"[:FUNCTION_NAME_LIMIT] if spec.name in shared else spec.name
            named[name] = spec
        return cls(named)

    def functions(self) -> tuple[dict, ...]:
        """The tools in OpenAI's function shape, under the names the model calls them by."""
        out = []
        for name, spec in self.tools.items():
            function = spec.function()
            function["function"]["name"] = name
            out.append(function)
        return tuple(out)


@dataclass
class ReplyJob:
    """What a tab's Stop reaches while a reply streams: its id, and its cancel, which reaches the step running
    (each step's engine stream has a cancel of its own, which the engine sets when the stream closes)."""

    id: str
    cancel: Relay

    @classmethod
    def of(cls, turn: Turn) -> ReplyJob:
        cancel = Relay()
        cancel.follow(turn.cancel)
        return cls(turn.id, cancel)


class Approvals:
    """The user's decisions on calls that wait for one, from whichever tab sends them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._decided: dict[str, str | None] = {}  # call → its decision, None while it waits

    def wait(self, call: str, cancel: threading.Event) -> str | None:
        """Block until ``call`` is decided (its decision) or ``cancel`` is set (None)."""
        with self._cond:
            self._decided[call] = None
            try:
                while self._decided[call] is None and not cancel.is_set():
                    self._cond.wait(BUSY_POLL_S)
                return self._decided[call]
            finally:
                del self._decided[call]

    def decide(self, call: str, decision: str) -> bool:
        """Give a waiting ``call`` its ``decision``; False when no such call waits."""
        with self._cond:
            if self._decided.get(call, "") is not None:
                return False
            self._decided[call] = decision
            self._cond.notify_all()
            return True


class ToolSteps:
    """The events of one reply across its steps (one terminal ``Done``), running the calls between them.

    ``emit`` sends a frame to the tab; ``position`` says how much thinking and answer the reply holds so far;
    ``save`` stores the calls (as the message keeps them) whenever one changes.
    """

    def __init__(self, turn: Turn, stop: Relay, first: Iterator, engine: Callable[[], Engine], box,
                 offer: Offer, approvals: Approvals, emit: Callable[[dict], None], tag: dict,
                 position: Callable[[], dict], save: Callable[[list[dict]], None]):
        self.turn = turn
        self.stop = stop
        self._first = first
        self._engine = engine
        self._box = box
        self._offer = offer
        self._approvals = approvals
        self._emit = emit
        self._tag = tag
        self._position = position
        self._save = save
        self.calls: list[dict] = []  # the reply's calls as stored
        self._step = 0  # the step the reply is at: each engine stream after the first answers the calls before it
        self._tool_ms = 0.0

    def events(self) -> Iterator:
        try:
            yield from self._steps()
        except Exception as exc:  # a fault between two steps must still end the reply for the user
            log.exception("the tool loop failed")
            yield Done("error", self._final({}, {}), "internal", f"Running the model's tool calls failed: {exc}. "
                       "See the server log; send again, or switch tools off.")

    def _steps(self) -> Iterator:
        turn, events, totals = self.turn, self._first, {}
        while True:
            step = {Thinking: [], Answer: []}
            made: list[ToolCall] = []
            for event in guarded(events):
                if isinstance(event, ToolCall):
                    made.append(event)
                    continue
                if isinstance(event, Done):
                    done = event
                    break
                if isinstance(event, (Thinking, Answer)):
                    step[type(event)].append(event.text)
                yield self._with_totals(event, totals) if isinstance(event, Stats) else event
            totals = _added(totals, done.stats)
            if done.finish_reason != "tool_calls" or not made or self.stop.is_set():
                yield replace(done, stats=self._final(totals, done.stats))
                return
            room = self.turn.options.max_tool_steps - len(self.calls)
            if room <= 0:  # every call of this step would be refused: the reply ends with them unanswered
                yield replace(done, stats=self._final(totals, done.stats))
                return
            results = [self._run(call, n < room) for n, call in enumerate(made)]
            self._step += 1
            said = Message("assistant", "".join(step[Answer]), "".join(step[Thinking]), tool_calls=tuple(made))
            vision = self._engine().info().vision  # a blind model gets a note for each result's images
            answers = [tool_message(call.call, result, vision) for call, result in zip(made, results)]
            turn = replace(turn, messages=[*turn.messages, said, *answers], continued=False, cancel=threading.Event())
            self.stop.follow(turn.cancel)
            if self.stop.is_set():
                yield Done("cancelled", self._final(totals, done.stats))
                return
            events = self._open(turn)
            if isinstance(events, Done):
                yield replace(events, stats=self._final(totals, events.stats))
                return

    def _open(self, turn: Turn):
        """The engine's stream for the next step; it waits while another caller took the engine meanwhile.
        A ``Done`` when it cannot start."""
        while True:
            try:
                return self._engine().stream(turn)
            except EngineBusy:
                if self.stop.wait(BUSY_POLL_S):
                    return Done("cancelled")
            except EngineError as exc:
                return Done("error", error_code=exc.code, error_message=exc.message)

    def _run(self, made: ToolCall, allowed: bool) -> ToolResult:
        """One call: approved (unless always allowed), run and answered; its frames go out as it changes."""
        spec = self._offer.tools.get(made.name)
        stored = {"call": new_id(), "name": made.name, "server": spec.server if spec else None,
                  "arguments": made.arguments, "state": "running", "ok": None, "content": [], "ms": None,
                  "error": None, "at": self._position(), "step": self._step}
        self.calls.append(stored)
        if made.error or spec is None or not allowed:
            why = made.error or (f"There is no tool {made.name!r}: call one of {', '.join(self._offer.tools)}."
                                 if spec is None else
                                 f"Not run: this reply made its {self.turn.options.max_tool_steps} calls (max_tool_steps). "
                                 "Answer with what you have.")
            return self._finish(stored, ToolResult(False, [text_part(why)], 0.0), "failed")
        if not self._box.always_allowed(spec.server, spec.name):
            self._update(stored, state="waiting")
            decision = self._approvals.wait(stored["call"], self.stop)
            if decision is None:
                return self._finish(stored, ToolResult(False, [text_part("The reply was stopped.")], 0.0), "failed")
            if decision == "deny":
                return self._finish(stored, ToolResult(False, [text_part("The user denied this call.")], 0.0),
                                    "denied")
            if decision == "always":
                self._box.switches.set_tool(spec.server, spec.name, None, True)
            self._update(stored, state="running")
        else:
            self._update(stored)
        result = self._box.call(spec.server, spec.name, made.arguments, self.turn.options.tool_timeout_s, self.stop)
        return self._finish(stored, result, "done" if result.ok else "failed")

    def _finish(self, stored: dict, result: ToolResult, state: str) -> ToolResult:
        self._tool_ms += result.ms
        ms = round(result.ms, 1)
        self._update(stored, ok=result.ok, content=result.content, ms=ms, state=state,
                     error=None if result.ok else result.text())
        self._emit({"type": "tool_result", **self._tag, "call": stored["call"], "ok": result.ok,
                    "content": result.content, "ms": ms})
        return result

    def _update(self, stored: dict, **changes) -> None:
        stored.update(changes)
        self._save(self.calls)
        frame = {"type": "tool_call", **self._tag, **{k: stored[k] for k in (
            "call", "name", "server", "arguments", "state", "at")}}
        if stored["state"] in ("done", "failed", "denied"):
            frame["ms"] = stored["ms"]
        if stored["state"] == "failed":
            frame["error"] = stored["error"]
        self._emit(frame)

    def _with_totals(self, event: Stats, totals: dict) -> Stats:
        return Stats(self._final(_added(totals, event.values), event.values)) if totals else event

    def _final(self, totals: dict, last: dict) -> dict:
        """The reply's numbers: counts summed over its steps, rates and times of the last step, the first's time
        to first token, and what its calls took; ``tool_acceptance`` where the engine counts the drafts in its
        calls (``tool_drafted``, ``tool_accepted``), else null."""
        stats = {**last, **totals} if totals else dict(last)
        drafted, accepted = stats.get("drafted"), stats.get("accepted")
        if drafted:
            stats["acceptance"] = round((accepted or 0) / drafted, 4)
        in_calls = stats.get("tool_drafted")
        stats.update(tool_calls=len(self.calls), tool_ms=round(self._tool_ms, 1),
                     tool_acceptance=round((stats.get("tool_accepted") or 0) / in_calls, 4) if in_calls else None)
        return stats


def _added(totals: dict, stats: dict) -> dict:
    """``totals`` with ``stats``' counts added; the first step's time to first token kept."""
    out = dict(totals)
    for key in SUMMED:
        if isinstance(stats.get(key), (int, float)):
            out[key] = (out.get(key) or 0) + stats[key]
    if "ttft_ms" not in out and stats.get("ttft_ms") is not None:
        out["ttft_ms"] = stats["ttft_ms"]
    return out
