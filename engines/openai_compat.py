"""Any OpenAI-compatible chat server (mlx-vlm, mlx-lm, llama.cpp, LM Studio, Ollama /v1, vLLM, SGLang).

Reasoning arrives as ``delta.reasoning_content``, ``delta.reasoning`` or inline
``<think>`` tags in ``content``; all of it becomes ``Thinking``. Speed and draft
numbers come from the server when it sends them (``usage``, llama.cpp-style
``timings``) and are measured here otherwise.

The reasoning budget: thinking is switched on or off per request
(``enable_thinking`` and ``chat_template_kwargs``), the budget is sent as
``thinking_budget`` for servers that honour it (mlx-vlm), and it is enforced
here too: a server cannot be told to close its thinking mid-stream, so thinking
that runs past the budget ends the reply with a notice saying so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import httpx
import orjson

from .base import Engine, EngineInfo, Turn
from .batching import DeltaBatch
from .errors import EngineBusy, EngineError, EngineNotReady
from .events import Answer, Done, Event, Stats, Thinking
from .options import GenerationOptions
from .repetition import RepetitionGuard
from .sse import Cancelled, EventStream, connect_error, error_detail, http_error, open_event_stream, send_cancellable
from .stats import StatsMeter
from .thinking import ThinkSplitter

log = logging.getLogger(__name__)
DEFAULT_STALL_S = 60.0  # longer than any keep-alive interval in use (MTPLX 5 s, llama.cpp 30 s)
MODELS_TIMEOUT_S = 10.0  # GET /models is instant on a healthy server
BUDGET_SLACK = 16  # a server that closes thinking at the budget may send a few tokens past it


def as_int(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def as_float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class ReplyReader:
    """Turns one reply's chunks into events and stats; raises EngineError when it must end."""

    def __init__(self, options: GenerationOptions, server: str):
        self.options = options
        self.server = server
        self.meter = StatsMeter()
        self.pending: list[Event] = []
        self.deltas = DeltaBatch(self.pending.append)
        self.splitter = ThinkSplitter()
        self.guard = RepetitionGuard()
        self.finish: str | None = None
        self.chunks = 0
        self.reported: dict = {}  # numbers the server sent, in the stats dict's keys
        self.skipped = 0  # malformed SSE lines
        self.draft_kind: str | None = None  # the server's drafter, when its timings name one (mlx-vlm)
        self.server_counts = False  # the server reports token counts as it goes (MTPLX progress frames)

    def feed(self, chunk: dict) -> list[Event]:
        self.chunks += 1
        self._check_error(chunk)
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            choice = choices[0]
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            # mlx-vlm sends the same text in both fields: read one.
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self._add(Thinking(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                for event in self.splitter.feed(content):
                    self._add(event)
            if isinstance(choice.get("finish_reason"), str):
                self.finish = choice["finish_reason"]
        self.read_usage(chunk.get("usage"))
        self.read_timings(chunk.get("timings"))
        self.read_extra(chunk)
        self._check_limits()
        if self.meter.first_token_at is not None and self.meter.live_due():
            self.deltas.flush()
            self.pending.append(Stats(self.snapshot()))
        return self.take()

    def take(self) -> list[Event]:
        out = self.pending[:]
        self.pending.clear()
        return out

    def finish_text(self) -> list[Event]:
        for event in self.splitter.flush():
            self._add(event)
        self.deltas.flush()
        return self.take()

    def _add(self, event: Thinking | Answer) -> None:
        thinking = isinstance(event, Thinking)
        self.meter.token(thinking, 0 if self.server_counts else 1)
        if thinking and self.guard.feed(event.text):
            self.deltas.add(event)
            raise EngineError(
                f"The model's thinking kept repeating the line \u201c{self.guard.triggered_line[:120]}\u201d, "
                "so the reply was stopped. Send again, perhaps with a slightly higher temperature.", "repetition",
            )
        self.deltas.add(event)

    def _check_error(self, chunk: dict) -> None:
        error = chunk.get("error")
        choices = chunk.get("choices")
        errored = isinstance(choices, list) and any(
            isinstance(c, dict) and c.get("finish_reason") == "error" for c in choices
        )
        if error is None and not errored:
            return
        if isinstance(error, dict):
            detail = str(error.get("message") or error.get("code") or "no detail")
            code = error.get("code")
        else:
            detail, code = (str(error) if error else "no detail"), None
        hint = " Start a new chat or shorten it." if code == "insufficient_memory" else " Send again."
        raise EngineError(f"{self.server} stopped the reply with an error: {detail.rstrip('.')}.{hint}", "server_error")

    def _check_limits(self) -> None:
        budget = self.options.reasoning_budget
        if budget and self.meter.answer_tokens == 0 and self.meter.thinking_tokens > budget + BUDGET_SLACK:
            raise EngineError(
                f"Thinking went past the reasoning budget ({budget} tokens) and {self.server} cannot be told to "
                "stop thinking early, so the reply was cut. Raise the reasoning budget in the settings, or set "
                "it to 0 for replies without thinking.", "thinking_budget",
            )

    def read_usage(self, usage) -> None:
        if not isinstance(usage, dict):
            return
        prompt, completion = as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))
        cached = as_int((usage.get("prompt_tokens_details") or {}).get("cached_tokens"))
        reasoning = as_int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens"))
        if prompt is not None:
            self.reported["prompt_tokens"] = prompt
        if cached is not None:
            self.reported["cached_tokens"] = cached
        if completion is not None:
            thinking = reasoning if reasoning is not None else min(self.meter.thinking_tokens, completion)
            self.reported.update(tokens=completion, thinking_tokens=thinking, answer_tokens=completion - thinking)

    def read_timings(self, timings) -> None:
        if not isinstance(timings, dict):
            return
        speed = as_float(timings.get("predicted_per_second"))
        if speed:
            self.reported["tok_s"] = round(speed, 1)
        if isinstance(timings.get("draft_kind"), str):
            self.draft_kind = timings["draft_kind"]
        drafted, accepted = as_int(timings.get("draft_n")), as_int(timings.get("draft_n_accepted"))
        if drafted is not None and accepted is not None:
            self.reported.update(drafted=drafted, accepted=accepted)
        if "prompt_tokens" not in self.reported and as_int(timings.get("prompt_n")) is not None:
            self.reported["prompt_tokens"] = as_int(timings["prompt_n"])

    def read_extra(self, chunk: dict) -> None:
        """Server-specific fields; the MTPLX engine reads its progress and stats here."""

    def snapshot(self) -> dict:
        stats = self.meter.snapshot()
        stats.update(self.reported)
        drafted, accepted = stats.get("drafted"), stats.get("accepted")
        stats["acceptance"] = round(accepted / drafted, 4) if drafted and accepted is not None else None
        if self.skipped:
            stats["skipped_lines"] = self.skipped
        return stats


class OpenAICompatEngine(Engine):
    """A chat server reached over HTTP at ``base_url`` (its /v1 address)."""

    name = "openai"

    def __init__(self, base_url: str, model: str | None = None, api_key: str | None = None,
                 stall_s: float = DEFAULT_STALL_S, connect_s: float = 5.0):
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.stall_s = stall_s
        headers = {"User-Agent": "specchat"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # The read timeout only ends the reader thread; stalls are judged by EventStream. Every request
        # gets its own connection, so that Stop can shut it down whatever stage the request is at.
        self._client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(connect=connect_s, read=stall_s + 5, write=30, pool=connect_s),
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self._lock = threading.Lock()
        self._active: Turn | None = None
        self._drafter: str | None = None
        self._unloaded = False

    @property
    def server(self) -> str:
        return f"The server at {self.base_url}"

    def info(self) -> EngineInfo:
        return EngineInfo(self.name, self.model or "", self._drafter, self._state, self._message, self._progress)

    def load(self, options: GenerationOptions) -> None:
        self._set_state("loading", f"connecting to {self.base_url}")
        try:
            self._connect()
        except EngineError:
            pass  # the state says why; the next message tries again

    def _connect(self, cancel: threading.Event | None = None) -> None:
        """Check the server and record the outcome in the state; raises EngineError when it fails."""
        try:
            note = self._check_models(cancel)
        except EngineError as exc:
            self._set_state("error", exc.message)
            raise
        self._set_state("ready", note)

    def _get_json(self, path: str, cancel: threading.Event | None = None):
        url = self.base_url + path
        request = self._client.build_request("GET", url, timeout=httpx.Timeout(MODELS_TIMEOUT_S))
        try:
            response = send_cancellable(self._client, request, cancel)
        except httpx.TimeoutException as exc:
            raise EngineError(f"{self.server} did not answer {url} within {MODELS_TIMEOUT_S:g} s: it may be stuck "
                              "or busy. Check it, then send again.", "stalled") from exc
        except httpx.HTTPError as exc:
            raise connect_error(exc, url) from exc
        if response.status_code != 200:
            raise http_error(response.status_code, error_detail(response), self.server,
                             response.headers.get("Retry-After"))
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            raise EngineError(f"{self.server} answered {url} with something that is not JSON: it does not look "
                              "OpenAI-compatible. Check --base-url (the server's /v1 address).", "not_openai") from None

    def _check_models(self, cancel: threading.Event | None = None) -> str:
        """Reach GET /models; pick the first model when none was named. Returns a note for the UI."""
        data = self._get_json("/models", cancel)
        models = data.get("data") if isinstance(data, dict) else None
        if not isinstance(models, list):
            raise EngineError(f"{self.server} answered /models without a model list: it does not look "
                              "OpenAI-compatible. Check --base-url (the server's /v1 address).", "not_openai")
        ids = [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
        if self.model is None:
            if not ids:
                raise EngineError(f"{self.server} lists no models. Load one there, or pass --model.", "no_model")
            self.model = ids[0]
        elif ids and self.model not in ids:
            return f"{self.model} is not among the served models ({', '.join(ids[:5])}); the server may load it."
        return ""

    def stream(self, turn: Turn) -> Iterator[Event]:
        with self._lock:
            if not self.can_start():
                raise EngineNotReady(f"The engine is not ready ({self._state}: {self._message}).")
            if self._active is not None:
                raise EngineBusy("A reply is already being generated. Wait for it or press Stop, then send again.")
            if turn.continued:
                raise EngineError(f"The {self.name} engine cannot go on with a reply: regenerate it instead.",
                                  code="continue_unsupported")
            self._active = turn
        return self._run(turn)

    def can_start(self) -> bool:
        # After a failed load the next message tries again (before_turn), unless the engine was unloaded.
        return self._state == "ready" or (self._state == "error" and not self._unloaded)

    def _run(self, turn: Turn) -> Iterator[Event]:
        try:
            yield from self._reply(turn)
        finally:
            with self._lock:
                self._active = None

    def payload(self, turn: Turn) -> dict:
        options = turn.options
        thinking = options.reasoning_budget > 0
        messages = [{"role": m.role, "content": m.content} for m in turn.messages]
        if options.system_prompt.strip() and not any(m.role == "system" for m in turn.messages):
            messages.insert(0, {"role": "system", "content": options.system_prompt})
        body = {
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": options.temperature,
            "top_p": options.top_p,
            # The server counts thinking in max_tokens; the setting counts the answer only.
            "max_tokens": options.max_tokens + (options.reasoning_budget if thinking else 0),
            "enable_thinking": thinking,  # mlx-vlm and MTPLX read it here
            "chat_template_kwargs": {"enable_thinking": thinking},  # mlx-lm, vLLM, SGLang read it here
        }
        if self.model:
            body["model"] = self.model
        if thinking:
            body["thinking_budget"] = options.reasoning_budget
        return body

    def headers(self, turn: Turn) -> dict:
        return {}

    def reader(self, turn: Turn) -> ReplyReader:
        return ReplyReader(turn.options, self.server)

    def before_turn(self, turn: Turn) -> None:
        """Runs on the reply's thread before the request: a server that was down is checked again."""
        if self._state != "ready":
            self._connect(turn.cancel)

    def cancel_remote(self, turn: Turn) -> None:
        """The user pressed Stop; closing the stream already tells a server that honours disconnects."""

    def _reply(self, turn: Turn) -> Iterator[Event]:
        reader = self.reader(turn)
        events: EventStream | None = None
        try:
            self.before_turn(turn)
            events = open_event_stream(self._client, self.base_url + "/chat/completions", self.payload(turn),
                                       self.headers(turn), self.server, self.stall_s, turn.cancel)
            for chunk in events.chunks(turn.cancel):
                reader.skipped = events.skipped
                yield from reader.feed(chunk)
            reader.skipped = events.skipped
        except Cancelled:
            self.cancel_remote(turn)
            yield Done("cancelled", reader.snapshot())
            return
        except EngineError as exc:
            yield from reader.finish_text()
            yield Done("error", reader.snapshot(), exc.code, self.explain(exc))
            return
        finally:
            if events is not None:
                events.close()
        yield from reader.finish_text()
        if reader.draft_kind and reader.draft_kind != self._drafter:
            self._drafter = reader.draft_kind
            self._notify()
        if turn.cancel.is_set():
            self.cancel_remote(turn)
            yield Done("cancelled", reader.snapshot())
            return
        if reader.finish is None and not events.done:
            if reader.chunks == 0 and events.skipped:
                code, message = "not_openai", (f"{self.server} sent no readable chunk ({events.skipped} malformed "
                                               "lines): it does not look OpenAI-compatible. Check --base-url.")
            else:
                code, message = "connection_lost", (f"{self.server} ended the stream before the reply was "
                                                    "finished. It may have stopped; send again once it is back.")
            yield Done("error", reader.snapshot(), code, self.explain(EngineError(message, code)))
            return
        yield Done("length" if reader.finish == "length" else "stop", reader.snapshot())

    def explain(self, exc: EngineError) -> str:
        """The message the user sees for ``exc``; the MTPLX engine adds what the supervisor will do."""
        return exc.message

    def reset_cache(self, deep: bool = False) -> dict:
        if self._active is not None:
            raise EngineBusy("A reply is being generated. Stop it or wait, then reset the cache.")
        return {"prompt_tokens": 0, "entries": 0, "bytes": 0,
                "message": "This server's cache cannot be reset from specchat; restart the server to clear it."}

    def cancel_all(self) -> None:
        active = self._active
        if active is not None:
            active.cancel.set()

    def unload(self) -> None:
        self._unloaded = True
        self.cancel_all()
        self._client.close()
        self._set_state("error", "unloaded")
