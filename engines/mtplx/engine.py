"""MTPLX: Qwen models with native multi-token prediction behind a supervised local daemon.

Built on the OpenAI-compatible engine, with what the daemon adds: the session
header that pins each conversation's KV cache, per-request ``generation_mode``
and ``depth`` from the drafter settings, reasoning effort for model families
that declare levels, live and final speculative statistics, cache clear and
SSD archive, and cancel by request id.

The daemon takes no token budget for thinking (an effort level is a hint, and
Qwen 3.5/3.6 ignore even that), so thinking is cut at the budget here and the
answer asked for in a second request on the same session.
"""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import replace

from ..base import EngineInfo, Turn
from ..errors import EngineBusy, EngineError
from ..openai_compat import DEFAULT_STALL_S, OpenAICompatEngine, ReplyReader, as_float, as_int, has_images
from ..sse import error_detail
from ..options import GenerationOptions
from ..stats import ROUND_KEYS, rounds_from_depths
from .supervisor import MtplxSupervisor

log = logging.getLogger(__name__)
DEFAULT_URL = "http://127.0.0.1:8766"
DEPTH_RANGE = (1, 3)  # MAX_PUBLIC_SPECULATIVE_DEPTH for the public Qwen packs
LADDER = ("low", "medium", "high", "xhigh")
# The reasoning-budget steps (0 is off) and the effort each stands for.
BUDGET_STEPS = ((512, "low"), (1024, "medium"), (2048, "high"))
# Families that declare effort levels; the rest (Qwen 3.5/3.6) ignore effort.
FAMILY_LEVELS = (
    (("bonsai",), ("medium", "xhigh")),
    (("step3.5", "step-3.5", "step3p5", "step35"), ("low", "medium", "high")),
    (("qwen3.8", "qwen38", "qwen4_exp"), ("low", "medium", "xhigh")),
)


def effort_for(budget: int, levels: tuple[str, ...] | list[str]) -> str | None:
    """The declared level for a reasoning budget, as the daemon resolves one: the nearest above, else below."""
    if budget <= 0 or not levels:
        return None
    wanted = next((effort for step, effort in BUDGET_STEPS if budget <= step), BUDGET_STEPS[-1][1])
    rank = LADDER.index(wanted)
    declared = sorted((LADDER.index(level) for level in levels if level in LADDER))
    above = [r for r in declared if r >= rank]
    return LADDER[above[0] if above else declared[-1]] if declared else None


def add_lists(a: list[int], b: list[int]) -> list[int]:
    """Element-wise sum of two per-depth lists of any lengths."""
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(max(len(a), len(b)))]


def family_levels(health: dict, model: str | None) -> tuple[str, ...]:
    """The effort levels the served model's family declares, known from its name (the daemon does not list them)."""
    name = " ".join(str(v) for v in (health.get("model_path"), health.get("model"), model) if v).lower()
    return next((levels for keys, levels in FAMILY_LEVELS if any(k in name for k in keys)), ())


class MtplxReader(ReplyReader):
    """Adds the daemon's progress frames (live) and ``mtplx_stats`` (final) to the stats.

    The daemon counts per request: after a budget cut, the answer request's counts add to the cut one's.
    """

    def __init__(self, options: GenerationOptions, server: str, images: bool = False):
        super().__init__(options, server, images)
        self._depths: tuple[list, list, int] | None = None  # the last (accepted, drafted, verify calls) by depth
        self._carried_depths: tuple[list, list, int] = ([], [], 0)

    def cut_thinking(self) -> list:
        if self._depths is not None:
            self._carried_depths = self._depths
        return super().cut_thinking()

    def read_extra(self, chunk: dict) -> None:
        progress = chunk.get("mtplx_progress")
        if isinstance(progress, dict) and not progress.get("heartbeat"):
            self._read_progress(progress)
        stats = chunk.get("mtplx_stats")
        if isinstance(stats, dict):
            self._read_final(stats)

    def _read_progress(self, progress: dict) -> None:
        tokens = as_int(progress.get("completion_tokens"))
        if tokens is not None:
            self.server_counts = True
            # Deltas of one verify round arrive merged: the daemon's count is the true one.
            if self.cut:  # the answer request: it writes no thinking
                self.meter.answer_tokens = tokens
            else:
                thinking = tokens if progress.get("decode_phase") == "reasoning" else self.meter.thinking_tokens
                self.meter.thinking_tokens = min(thinking, tokens)
                self.meter.answer_tokens = tokens - self.meter.thinking_tokens
        speed = as_float(progress.get("phase_tok_s")) or as_float(progress.get("decode_tok_s"))
        if speed and not self.cut:
            self.reported["tok_s"] = round(speed, 1)
        self._read_depths(progress.get("accepted_by_depth"), progress.get("drafted_by_depth"),
                          progress.get("verify_calls"))

    def _read_depths(self, accepted, drafted, verify_calls) -> None:
        if not (isinstance(accepted, list) and isinstance(drafted, list)) or not drafted:
            return
        accepted = [a if isinstance(a, int) else 0 for a in accepted]
        drafted = [d if isinstance(d, int) else 0 for d in drafted]
        calls = as_int(verify_calls)
        self._depths = (accepted, drafted, calls or 0)
        carried_accepted, carried_drafted, carried_calls = self._carried_depths
        accepted, drafted = add_lists(carried_accepted, accepted), add_lists(carried_drafted, drafted)
        if calls is not None:
            self.reported.update(rounds_from_depths(carried_calls + calls, accepted))
        self.reported["drafted"] = sum(drafted)
        self.reported["accepted"] = sum(accepted)
        self.reported["acceptance_by_depth"] = [round(a / d, 4) if d else None for a, d in zip(accepted, drafted)]

    def _read_final(self, stats: dict) -> None:
        ttft = as_float(stats.get("ttft_s"))
        speed = as_float(stats.get("decode_tok_s")) or as_float(stats.get("tok_s"))
        if not self.cut:  # else they time the answer request alone: the meter times the reply
            if ttft is not None:
                self.reported["ttft_ms"] = round(ttft * 1000.0, 1)
            if speed:
                self.reported["tok_s"] = round(speed, 1)
        for key in ("prompt_tokens", "cached_tokens"):
            value = as_int(stats.get(key))
            # The answer request's prompt holds the reasoning: the cut request's numbers, when known, are the reply's.
            if value is not None and not (self.cut and key in self.reported):
                self.reported[key] = value
        carried_accepted, carried_drafted, _ = self._carried_depths
        for key, source, carried in (("drafted", "drafted_tokens", sum(carried_drafted)),
                                     ("accepted", "accepted_drafts", sum(carried_accepted))):
            value = as_int(stats.get(source))
            if value is not None:
                self.reported[key] = carried + value
        if stats.get("generation_mode") == "ar":
            for key in ("drafted", "accepted", "acceptance_by_depth", *ROUND_KEYS):
                self.reported.pop(key, None)
        else:
            self._read_depths(stats.get("accepted_by_depth"), stats.get("drafted_by_depth"), stats.get("verify_calls"))

    def snapshot(self) -> dict:
        stats = super().snapshot()
        if stats.get("drafted") is None:
            stats["acceptance"] = None
        return stats


class MtplxEngine(OpenAICompatEngine):
    """``base_url`` is the daemon's address (its /v1 is derived); ``model`` is what ``mtplx serve`` loads."""

    name = "mtplx"
    supports_deep_reset = True
    sessions_are_ours = True  # the daemon frees a session after its last chunk is written
    thinking_fields = (*OpenAICompatEngine.thinking_fields, "reasoning_effort")

    def __init__(self, base_url: str = DEFAULT_URL, model: str | None = None, api_key: str | None = None,
                 context_window: int | None = 16384, kv_quant: str = "q8", depth: int = 3,
                 executable: str = "mtplx", stall_s: float = DEFAULT_STALL_S, start_timeout_s: float = 1800.0,
                 grace_s: float = 10.0, download: bool = True, may_start: bool = True):
        address = base_url.rstrip("/").removesuffix("/v1")
        super().__init__(address + "/v1", model, api_key, stall_s=stall_s)
        self.served_model: str | None = None
        self.supervisor = MtplxSupervisor(address, model, context_window, kv_quant, depth, api_key, executable,
                                          start_timeout_s, grace_s, download, may_start)
        self._warmed_system: str | None = None
        self._request_ids: dict[str, str] = {}
        self.tell_budget = False  # the daemon reads no thinking_budget
        self.vision = False  # until /v1/models says
        self.vision_note = "MTPLX has not said yet whether its model can see images: wait for it to start."

    @property
    def server(self) -> str:
        return f"MTPLX at {self.supervisor.address}"

    def info(self) -> EngineInfo:
        mtp = self._status.state == "ready" and self.supervisor.health.get("load_mtp", True) is not False
        return replace(super().info(), model=self.model or self.served_model or "",
                       drafter="MTP head (MTPLX)" if mtp else None)

    def load(self, options: GenerationOptions) -> None:
        self._set_state("loading", f"looking for MTPLX at {self.supervisor.address}", 0.0)
        try:
            self._ensure_daemon()
            self._set_state("loading", "warming up the system prompt", 0.97)
            self._warm_up(options.system_prompt)
        except EngineError as exc:
            self._set_state("error", exc.message)
            return
        adopted = "" if self.supervisor.owned else "using the MTPLX daemon that was already running"
        self._set_state("ready", adopted)

    def _ensure_daemon(self) -> None:
        # "starting" while the daemon comes up (it loads its model before opening the port).
        health = self.supervisor.ensure(lambda message, progress: self._set_state("starting", message, progress))
        self.served_model = health.get("model") if isinstance(health.get("model"), str) else None
        window = health.get("context_window")
        self.context = window if isinstance(window, int) and window > 0 else None
        self._read_vision()

    def _read_vision(self) -> None:
        """The daemon takes images when its model has a vision tower (``supports_vision`` in /v1/models),
        and only in its MTP mode: a daemon without its MTP head cannot take them."""
        data = self._get_json("/models")
        models = data.get("data") if isinstance(data, dict) else None  # the loaded chat model, alone by default
        entry = models[0] if isinstance(models, list) and models and isinstance(models[0], dict) else {}
        model = entry.get("id") or self.served_model or "its model"
        if entry.get("supports_vision") is not True:
            note = (f"The model MTPLX serves ({model}) cannot see images: it has no vision tower. Load a "
                    "vision-capable model in MTPLX (a Qwen 3.5 or 3.6 checkpoint that keeps its vision tower), or "
                    "remove the images and send again.")
        elif self.supervisor.health.get("load_mtp", True) is False:
            note = ("MTPLX takes images only in its MTP mode, and this daemon runs without its MTP head. Restart "
                    "MTPLX with its MTP head loaded, or remove the images and send again.")
        else:
            note = None
        self.vision, self.vision_note = note is None, note

    def _warm_up(self, system_prompt: str) -> None:
        """Compile the daemon's kernels and bank the system prompt's prefix before the first message."""
        if not system_prompt.strip():
            return
        body = {"messages": [{"role": "system", "content": system_prompt}, {"role": "user", "content": "hello"}],
                "max_tokens": 1, "temperature": 0.0, "stream": False, "enable_thinking": False}
        try:
            response = self._client.post(self.base_url + "/chat/completions", json=body, timeout=120)
        except Exception as exc:  # a cold first message is slower, never wrong
            log.warning("MTPLX warm-up failed, the first message will be slower: %s", exc)
            return
        if response.status_code != 200:  # tried again when the settings change
            log.warning("MTPLX warm-up failed, the first message will be slower: HTTP %d (%s)",
                        response.status_code, error_detail(response))
            return
        log.info("MTPLX warm-up done")
        self._warmed_system = system_prompt

    def _check_startable(self, turn: Turn) -> None:
        super()._check_startable(turn)
        if not turn.options.speculative and has_images(turn):
            raise EngineError("MTPLX takes images only while it drafts (its MTP mode), so neither a reply with the "
                              "drafter off nor a race's or sweep's drafter-off lane can run on images. Turn the "
                              "drafter on, or remove the images and send again.", code="invalid_settings")

    def prepare(self, options: GenerationOptions) -> None:
        if self._status.state == "ready" and options.system_prompt != self._warmed_system:
            threading.Thread(target=self._warm_up, args=(options.system_prompt,), name="mtplx-warm-up",
                             daemon=True).start()

    def before_turn(self, turn: Turn) -> None:
        """A daemon that died since the last message is started again (ours) or replaced (an adopted one)."""
        if self.supervisor.probe()[0] == "mtplx":
            return
        self._set_state("starting", "MTPLX is not answering: starting it again", 0.0)
        try:
            self._ensure_daemon()
        except EngineError as exc:
            self._set_state("error", exc.message)
            raise
        self._set_state("ready", "MTPLX was restarted")

    def payload(self, turn: Turn) -> dict:
        options = turn.options
        body = super().payload(turn)
        for key in ("model", "stream_options"):  # ignored by MTPLX: the loaded model answers
            body.pop(key, None)
        speculative = options.speculative and self.supervisor.health.get("load_mtp", True) is not False
        body["generation_mode"] = "mtp" if speculative else "ar"
        if speculative and options.draft_block_size != "auto":  # auto: the daemon's own depth (``mtplx tune``'s)
            low, high = DEPTH_RANGE
            body["depth"] = max(low, min(high, options.draft_block_size - 1))
        effort = effort_for(options.reasoning_budget, family_levels(self.supervisor.health, self.model))
        if effort is not None:
            body["reasoning_effort"] = effort
        return body

    def headers(self, turn: Turn) -> dict:
        request_id = f"specchat-{uuid.uuid4().hex}"
        self._request_ids[turn.id] = request_id
        # Session by header: a body session_id is ignored. No X-MTPLX-Client: that would override our sampling.
        return {"X-MTPLX-Session-Id": turn.conversation_id, "X-MTPLX-Request-Id": request_id}

    def reader(self, turn: Turn) -> ReplyReader:
        return MtplxReader(turn.options, self.server, has_images(turn))

    def before_answer(self, turn: Turn) -> None:
        """The cut request stops at once, so that its session is free for the answer request."""
        self.cancel_remote(turn)

    def cancel_remote(self, turn: Turn) -> None:
        request_id = self._request_ids.pop(turn.id, None)
        if request_id is None:
            return
        try:
            self.supervisor.post(f"/v1/mtplx/cancel/chatcmpl-{request_id}", timeout=2.0)
        except EngineError as exc:  # the closed stream already cancels it on the daemon
            log.info("MTPLX cancel: %s", exc.message)

    def _reply(self, turn: Turn):
        try:
            yield from super()._reply(turn)
        finally:
            self._request_ids.pop(turn.id, None)

    def explain(self, exc: EngineError) -> str:
        if exc.code in ("connection_lost", "unreachable") and self.supervisor.exited(within=1.0):
            return "MTPLX stopped during the reply. It will be started again with your next message."
        return exc.message

    def reset_cache(self, deep: bool = False) -> dict:
        """Clear the daemon's RAM session bank; ``deep`` also archives its SSD cache so nothing is restored."""
        if self.busy:
            raise EngineBusy("A reply is being generated. Stop it or wait, then reset the cache.")
        cleared = self.supervisor.post("/admin/cache/clear")
        entries = sum(as_int(cleared.get(k)) or 0 for k in ("sessions_cleared", "bank_entries_cleared"))
        freed = {"prompt_tokens": 0, "entries": entries, "bytes": 0}
        if deep:
            archived = self.supervisor.post("/admin/cache/ssd/archive")
            path = archived.get("archive_path")
            freed["ssd_archive"] = path
            # The daemon moves its SSD cache aside rather than deleting it: the disk is not freed.
            freed["message"] = (f"Cleared {entries} cached sessions. MTPLX moved its SSD cache to {path}, where it "
                                "still takes disk space: delete that folder to free it.")
            log.info("MTPLX archived its SSD cache to %s (kept on disk)", path)
        return freed

    def forget(self, conversation_id: str) -> None:
        threading.Thread(target=self._forget, args=(conversation_id,), name="mtplx-forget", daemon=True).start()

    def _forget(self, conversation_id: str) -> None:
        try:
            self.supervisor.post(f"/admin/sessions/{conversation_id}/clear", timeout=5.0)
        except EngineError as exc:
            log.info("MTPLX session clear: %s", exc.message)

    def unload(self) -> None:
        """Stop a daemon this engine started; an adopted one keeps running."""
        self.cancel_all()
        self.supervisor.close()
        super().unload()
