"""One reply: thinking up to the budget, then the answer, on one cache.

Phase one generates at most ``reasoning_budget`` tokens. If thinking is still
open then, ``</think>`` is appended as tokens and phase two continues from the
stored ids, so the cache is reused (no re-tokenised string prompt) and the
budget holds with a drafter too (mlx-vlm ignores its own budget then).
"""

from __future__ import annotations

from collections.abc import Callable

from ..base import Turn
from ..batching import DeltaBatch
from ..events import Done, Event, Stats
from ..stats import StatsMeter, acceptance_by_depth
from ..thinking import ThinkSplitter
from .conversations import ConversationCache
from .loading import LoadedModel
from .prompts import PromptBuilder


class TurnGeneration:
    def __init__(
        self,
        loaded: LoadedModel,
        prompts: PromptBuilder,
        conversation: ConversationCache,
        turn: Turn,
        emit: Callable[[Event], None],
        apc_manager=None,
    ):
        self.loaded = loaded
        self.prompts = prompts
        self.conversation = conversation
        self.turn = turn
        self.options = turn.options
        self.emit = emit
        self.deltas = DeltaBatch(emit)
        self.apc_manager = apc_manager
        self.thinking = self.options.reasoning_budget > 0
        self.splitter = ThinkSplitter(thinking=self.thinking)
        self.meter = StatsMeter()
        self.drafter = loaded.drafter if self.options.speculative else None
        self._draft_snapshot = None
        self._past_rounds: list[tuple[float, int]] = []  # draft rounds of earlier phases
        self._first_phase = True

    def run(self, input_ids: list[int]) -> Done:
        """Generate the reply to ``input_ids``; returns the final ``Done``."""
        from mlx_vlm.speculative.common import speculative_stats_snapshot

        self.meter.prompt_tokens = len(input_ids)
        if self.drafter is not None:
            self._draft_snapshot = speculative_stats_snapshot(self.drafter)
        try:
            if not self.thinking:
                finish = self._phase(input_ids, self.options.max_tokens)
            else:
                finish = self._phase(input_ids, self.options.reasoning_budget)
                if finish == "length":
                    finish = self._continue_after_budget()
        finally:
            self._flush()  # text already generated reaches the user even if generation failed
        self._read_draft_stats()
        return Done(finish, self.meter.snapshot())

    def _continue_after_budget(self) -> str:
        ids = self.conversation.ids
        if self.splitter.thinking:
            self._flush()
            self.splitter.thinking = False
            self.meter.end_thinking()
            ids = ids + self.prompts.think_close_ids
        remaining = self.options.max_tokens - self.meter.answer_tokens
        if remaining <= 0:
            return "length"
        return self._phase(ids, remaining)

    def _phase(self, input_ids: list[int], max_tokens: int) -> str:
        import mlx.core as mx
        from mlx_vlm import stream_generate

        kwargs = {
            "input_ids": mx.array([input_ids]),
            "max_tokens": max_tokens,
            "temperature": self.options.temperature,
            "top_p": self.options.top_p,
            "prefill_step_size": self.options.prefill_step_size or None,
            "prompt_cache_state": self.conversation.state,
        }
        if self.apc_manager is not None:
            kwargs["apc_manager"] = self.apc_manager
        if self.drafter is not None:
            kwargs.update(
                draft_model=self.drafter,
                draft_kind=self.loaded.drafter_kind,
                draft_block_size=self.options.draft_block_size,
            )
        stream = stream_generate(self.loaded.model, self.loaded.processor, "", **kwargs)
        finish = "length"
        try:
            for chunk in stream:
                if self.turn.cancel.is_set():
                    return "cancelled"
                if self._first_phase:
                    self._first_phase = False
                    self.meter.cached_tokens = int(chunk.cached_tokens or 0)
                if chunk.finish_reason is not None:
                    # The final chunk repeats the last token and carries the detokenizer's
                    # tail. The loop runs on: after it the library stores the prompt cache.
                    self._deliver(chunk.text)
                    finish = chunk.finish_reason
                    continue
                thinking = self.splitter.thinking
                self._deliver(chunk.text)
                self.meter.token(thinking)
                if self.meter.live_due():
                    self._read_draft_stats()
                    self.deltas.flush()
                    self.emit(Stats(self.meter.snapshot()))
            self._reconcile_cache()
            return finish
        finally:
            stream.close()
            # The drafter's per-round lists start afresh with the next phase.
            self._past_rounds = self._draft_rounds()

    def _draft_rounds(self) -> list[tuple[float, int]]:
        if self.drafter is None:
            return []
        return self._past_rounds + list(zip(self.drafter.accept_lens, self.drafter.draft_lens))

    def _reconcile_cache(self) -> None:
        """Make the stored ids match what the cache holds.

        After a speculative run the library stores the last sampled token though
        the cache has not processed it yet; reusing that would skip the token.
        Shortening the library's ids (the conversation keeps them all) makes the
        next prompt feed that token instead.
        """
        state = self.conversation.state
        self.conversation.ids = list(state.token_ids or [])
        offsets = [getattr(c, "offset", None) for c in state.cache or []]
        cached = max((o for o in offsets if isinstance(o, int)), default=None)
        if cached is not None and cached < len(self.conversation.ids):
            state.token_ids = self.conversation.ids[:cached]

    def _deliver(self, text: str) -> None:
        for event in self.splitter.feed(text):
            self.deltas.add(event)

    def _flush(self) -> None:
        for event in self.splitter.flush():
            self.deltas.add(event)
        self.deltas.flush()

    def _read_draft_stats(self) -> None:
        if self.drafter is None:
            return
        from mlx_vlm.speculative.common import speculative_stats_since

        _, accepted, drafted = speculative_stats_since(self.drafter, self._draft_snapshot)
        if drafted is not None:
            self.meter.drafted = int(drafted)
            self.meter.accepted = int(round(accepted))
        else:
            self.meter.drafted, self.meter.accepted = 0, 0
        self.meter.by_depth = acceptance_by_depth(self._draft_rounds())
