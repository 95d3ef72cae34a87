"""The protocol fuzz: property-based frames (hypothesis) against a real server, over one socket.

Each example is a batch of frames sent over one socket: well-formed frames of every type with odd values,
malformed JSON, wrong types, unknown fields, binary frames, frames over the 1 MiB limit, deep nesting.
After every frame a sync frame (a stop of an unknown id, answered by an error) marks where its answers end.
Checked throughout: the socket stays open, every reply asked for (chat, regenerate, continue, race, sweep)
ends with exactly one done (race_done, sweep_done) or error, the server keeps running and logs no traceback.
tests/test_fuzz.py runs it short; ``python -m benchmarks.fuzz`` runs it long. Needs hypothesis (the test extra).
"""

from __future__ import annotations

import json
import time
from collections import Counter

import orjson
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.support.harness import ServerProcess, WsClient

REPLIES = ("chat", "regenerate", "continue", "race", "sweep")
ENDS = {"chat": "done", "regenerate": "done", "continue": "done", "race": "race_done", "sweep": "sweep_done"}
SETTING_KEYS = ("reasoning_budget", "speculative", "draft_block_size", "temperature", "top_p", "max_tokens",
                "system_prompt", "prefix_cache", "prefix_cache_entries", "prefill_step_size", "decode_loop")
# Keeps replies on a real model short: settings the fuzz sends are drawn from these (and anything invalid).
BOUNDED = {"max_tokens": 48, "reasoning_budget": 48, "prefill_step_size": 4096}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False),
                    st.text(max_size=40))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)
ids = st.one_of(st.text(min_size=1, max_size=30), st.text(max_size=3), st.integers(), st.none())


def setting_value(key: str):
    if key in BOUNDED:
        return st.one_of(st.integers(-3, BOUNDED[key]), scalars)
    return st.one_of(st.integers(-3, 70), st.floats(-1, 3, allow_nan=False), st.booleans(),
                     st.sampled_from(["specchat", "mlx-vlm", "", "auto"]), st.text(max_size=200), st.none())


settings_values = st.one_of(
    st.lists(st.sampled_from(SETTING_KEYS).flatmap(lambda key: setting_value(key).map(lambda v: (key, v))),
             max_size=4).map(dict),
    st.dictionaries(st.sampled_from(SETTING_KEYS), scalars, max_size=3),
    json_values,
)
specs = st.one_of(  # never a spec that loads ({} would: the default engine), so the engine under test stays
    st.fixed_dictionaries({"name": st.text(max_size=12).filter(lambda n: n not in ("mlx", "mtplx", "openai", "fake"))}),
    st.dictionaries(st.text(max_size=8), json_values, max_size=4).map(lambda spec: {**spec, "colour": "red"}),
    json_values.filter(lambda value: not isinstance(value, dict)),
)


def typed(kind: str):
    """Frames of one type: its fields drawn wide, so some are valid and most are not."""
    fields = {
        "chat": {"id": ids, "text": st.text(max_size=300), "parent": ids},
        "regenerate": {"id": ids, "message": ids},
        "continue": {"id": ids},
        "select": {"message": ids},
        "stop": {"id": ids},
        "settings": {"values": settings_values},
        "switch_engine": {"spec": specs},
        "reset_cache": {"deep": st.one_of(st.booleans(), scalars)},
        "new_chat": {},
        "race": {"id": ids, "text": st.text(max_size=100), "runs": st.one_of(st.integers(-1, 3), scalars),
                 "greedy": scalars},
        "sweep": {"id": ids, "text": st.text(max_size=100), "runs": st.integers(-1, 2),
                  "blocks": st.one_of(st.lists(st.integers(-1, 17), max_size=5), scalars)},
    }[kind]
    return st.fixed_dictionaries({"type": st.just(kind)}, optional=fields)


KINDS = ("chat", "regenerate", "continue", "select", "stop", "settings", "switch_engine", "reset_cache", "new_chat",
         "race", "sweep")
well_formed = st.sampled_from(KINDS).flatmap(typed).map(json.dumps)
malformed = st.one_of(
    st.text(max_size=200),  # not JSON, or JSON that is not an object
    json_values.map(json.dumps),
    st.dictionaries(st.text(max_size=10), json_values, max_size=5).map(json.dumps),  # no or odd "type"
    st.builds(lambda kind, extra: json.dumps({"type": kind, **extra}), st.sampled_from(KINDS),
              st.dictionaries(st.text(max_size=10), json_values, max_size=4)),
    st.binary(max_size=64),  # binary frames
    st.integers(1, 3000).map(lambda depth: "[" * depth + "]" * depth),  # deep nesting
    st.integers(1, 3000).map(lambda depth: '{"a":' * depth + "1" + "}" * depth),
    st.sampled_from(['{"type":"chat","id":"x","text":"' + "y" * (1 << 20) + '"}',  # over the 1 MiB limit
                     '{"type": "chat", "id": "n", "text": NaN}', '{"type":"chat","id":"s","text":"\\ud800"}',
                     '{"type":"chat","type":"stop","id":"dup"}', "", " ", "null", "[]", '"chat"']),
)
# Valid frames whose ids come from a small pool, so that stops and repeated ids meet the reply in flight.
pool = st.sampled_from(["r1", "r2", "r3", "race-1"])
valid = st.one_of(
    st.builds(lambda i, t: {"type": "chat", "id": i, "text": t}, pool, st.text(min_size=1, max_size=300)),
    st.builds(lambda i: {"type": "regenerate", "id": i}, pool),
    st.builds(lambda i: {"type": "continue", "id": i}, pool),
    st.builds(lambda i: {"type": "stop", "id": i}, pool),
    st.builds(lambda i, t: {"type": "race", "id": i, "text": t, "runs": 1}, pool, st.text(min_size=1, max_size=50)),
    st.builds(lambda i, b: {"type": "sweep", "id": i, "text": "hi", "runs": 1, "blocks": [1, *b]}, pool,
              st.lists(st.integers(2, 6), max_size=2, unique=True)),
    st.just({"type": "new_chat"}),
    st.builds(lambda values: {"type": "settings", "values": values}, settings_values),
    st.builds(lambda spec: {"type": "switch_engine", "spec": spec}, specs),
    st.builds(lambda message: {"type": "select", "message": message}, st.one_of(pool, st.text(max_size=40))),
    st.builds(lambda deep: {"type": "reset_cache", "deep": deep}, st.booleans()),
).map(json.dumps)
frames = st.one_of(valid, valid, well_formed, well_formed, malformed)


class Fuzzer:
    """Sends frames over one socket and checks every answer."""

    def __init__(self, ws: WsClient):
        self.ws = ws
        self.sent = 0
        self.kinds: Counter = Counter()
        self.codes: Counter = Counter()
        self.replies = 0  # replies that started (and so must end with one done)
        self.expected: dict[int, str] = {}  # frame number -> the reply type it asked for
        self.ends: Counter = Counter()  # frame number -> the frames that ended its reply
        self.active: tuple[str, int] | None = None  # (id, frame number) of the tab's reply in flight

    def send(self, raw: str | bytes) -> None:
        self.sent += 1
        number, kind = self.sent, _kind(raw)
        self.kinds[kind] += 1
        frame_id = _id(raw)
        if kind in REPLIES:
            self.expected[number] = kind
        self.ws.send(raw)
        sync = f"sync-{number}"
        self.ws.send({"type": "stop", "id": sync})
        deadline = time.monotonic() + 60
        while True:
            frame = self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))
            if frame["type"] == "error":
                if frame.get("id") == sync:
                    break
                self.codes[frame.get("code")] += 1
                # Errors answer the frame just sent (frames are handled in order): a refused reply ends here.
                if kind in REPLIES and frame.get("id") == frame_id:
                    self.ends[number] += 1
            else:
                self._seen(frame, number)
        if kind in REPLIES and not self.ends[number] and self.active is None:
            self.active = (frame_id, number)  # neither refused nor ended yet: it runs (a race starts later)

    def _seen(self, frame: dict, number: int | None) -> None:
        """A frame of the reply in flight; ``number``: the frame just sent, whose reply may be starting."""
        kind = frame["type"]
        if kind in ("start", "done", "race_done", "sweep_done") and "run" not in frame and self.active is None \
                and number in self.expected:
            self.active = (frame["id"], number)
        if kind in ("done", "race_done", "sweep_done") and "run" not in frame:
            self.replies += 1
            assert self.active is not None and frame["id"] == self.active[0], f"a {kind} for no reply in flight: {frame}"
            owner = self.active[1]
            assert ENDS[self.expected[owner]] == kind, f"{self.expected[owner]} ended with {kind}: {frame}"
            self.ends[owner] += 1
            self.active = None

    def settle(self, timeout: float = 60) -> None:
        """Stop the reply still in flight and wait for its end; then every asked-for reply ended exactly once."""
        if self.active is not None:
            self.ws.send({"type": "stop", "id": self.active[0]})
        deadline = time.monotonic() + timeout
        while self.active is not None:
            self._seen(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())), None)
        self.ws.send({"type": "new_chat"})  # a fresh conversation for the next batch
        self.ws.until("new_chat", timeout=timeout)
        for number, kind in self.expected.items():
            assert self.ends[number] == 1, f"{kind} (frame {number}) ended {self.ends[number]} times"


def _id(raw: str | bytes) -> str | None:
    """The id the server reads from a frame for its error (webapp/web/chat.py), with the same JSON parser."""
    try:
        frame = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    value = frame.get("id") if isinstance(frame, dict) else None
    return value if isinstance(value, str) else None


def _kind(raw: str | bytes) -> str:
    if isinstance(raw, bytes):
        return "binary"
    try:
        frame = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "not json"
    kind = frame.get("type") if isinstance(frame, dict) else None
    return kind if isinstance(kind, str) and kind in KINDS else "odd"


def fuzz(server: ServerProcess, frames_wanted: int, batch: int = 40) -> Fuzzer:
    """Send about ``frames_wanted`` frames in batches of up to ``batch``; raises on the first broken promise."""
    ws = WsClient(server.ws_url)
    fuzzer = Fuzzer(ws)
    ws.send({"type": "settings", "values": {key: value // 2 for key, value in BOUNDED.items()}})
    ws.until("settings")

    @settings(max_examples=50, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.lists(frames, min_size=1, max_size=batch))
    def one_batch(sent: list) -> None:
        for raw in sent:
            if fuzzer.sent >= frames_wanted:
                break
            fuzzer.send(raw)
        fuzzer.settle()
        assert server.proc.poll() is None, "the server exited"

    try:
        while fuzzer.sent < frames_wanted:
            one_batch()
    finally:
        ws.close()
    return fuzzer


def tracebacks(server: ServerProcess) -> list[str]:
    return [line for line in server.lines if "Traceback" in line]
