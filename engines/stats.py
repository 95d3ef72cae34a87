"""Per-reply counters turned into the stats dict that live and final events carry."""

from __future__ import annotations

import time

LIVE_INTERVAL_S = 0.1
ROUND_KEYS = ("rounds", "mean_accepted", "accepted_hist")


def acceptance_by_depth(rounds: list[tuple[float, int]]) -> list[float | None]:
    """Share of draft rounds whose k-th drafted token was kept, for k = 1, 2, …

    ``rounds`` holds (accepted, drafted) per round; drafts are kept as a prefix,
    so depth k counts when at least k were accepted.
    """
    depth = max((drafted for _, drafted in rounds), default=0)
    shares = []
    for k in range(1, depth + 1):
        drafted = sum(1 for _, d in rounds if d >= k)
        accepted = sum(1 for a, d in rounds if d >= k and a >= k)
        shares.append(round(accepted / drafted, 4) if drafted else None)
    return shares


def round_stats(rounds: list[tuple[int, int]] | None) -> dict:
    """``rounds`` (verify rounds), ``mean_accepted`` (drafts kept per round) and
    ``accepted_hist`` (rounds that kept 0, 1, …, most-drafted drafts); null without rounds."""
    if rounds is None:
        return dict.fromkeys(ROUND_KEYS)
    hist = [0] * (max((d for _, d in rounds), default=0) + 1)
    for accepted, _ in rounds:
        hist[accepted] += 1
    mean = round(sum(a for a, _ in rounds) / len(rounds), 3) if rounds else None
    return {"rounds": len(rounds), "mean_accepted": mean, "accepted_hist": hist}


def rounds_from_depths(verify_calls: int, accepted_by_depth: list[int]) -> dict:
    """``round_stats``' keys from a server's totals: round count and drafts kept at each depth.

    Drafts are kept as a prefix, so ``accepted_by_depth[k]`` rounds kept more
    than k drafts and each histogram bar is the difference of two neighbours.
    Null when the totals do not fit that (an inconsistent or partial report).
    """
    kept_more_than = [verify_calls, *accepted_by_depth, 0]
    hist = [kept_more_than[k] - kept_more_than[k + 1] for k in range(len(kept_more_than) - 1)]
    if verify_calls <= 0 or min(hist) < 0:
        return round_stats(None)
    mean = round(sum(accepted_by_depth) / verify_calls, 3)
    return {"rounds": verify_calls, "mean_accepted": mean, "accepted_hist": hist}


class StatsMeter:
    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.first_token_at: float | None = None
        self.last_token_at: float | None = None
        self.thinking_ended_at: float | None = None
        self.thinking_tokens = 0
        self.answer_tokens = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.drafted: int | None = None
        self.accepted: int | None = None
        self.by_depth: list[float | None] | None = None
        self.rounds: list[tuple[int, int]] | None = None  # (accepted, drafted) per verify round
        self.decode_loop: tuple[str, str | None] | None = None  # (loop, why when not specchat's): MLX only
        self.blocks: dict[int, int] | None = None  # rounds per draft block (1: plain steps), where counted
        self.auto_block: int | None = None  # draft_block_size "auto": the block it runs at now (1: drafting off)
        # The time to first token's parts, where the engine can tell them apart: the vision tower's time on
        # this turn's images, then the prompt's prefill; the rest is the first token's own step.
        self.image_tokens = 0
        self.vision_ms: float | None = None
        self.prefill_ms: float | None = None
        self._last_live = 0.0

    @property
    def tokens(self) -> int:
        return self.thinking_tokens + self.answer_tokens

    def token(self, thinking: bool, count: int = 1) -> None:
        now = time.perf_counter()
        if self.first_token_at is None:
            self.first_token_at = now
        self.last_token_at = now
        if thinking:
            self.thinking_tokens += count
        else:
            if self.thinking_tokens and self.thinking_ended_at is None:
                self.thinking_ended_at = now
            self.answer_tokens += count

    def record_rounds(self, rounds: list[tuple[int, int]]) -> None:
        """Every verify round so far, as (accepted, drafted); the draft totals follow from them."""
        self.rounds = rounds
        self.drafted = sum(d for _, d in rounds)
        self.accepted = sum(a for a, _ in rounds)
        self.by_depth = acceptance_by_depth(rounds)

    def ran_block(self, block: int, auto: bool = False) -> None:
        """One decode step after the first token: a plain step (block 1) or a round at ``block``; ``auto``: the
        block was auto's choice."""
        if self.blocks is None:
            self.blocks = {}
        self.blocks[block] = self.blocks.get(block, 0) + 1
        if auto:
            self.auto_block = block

    def block_history(self) -> dict[str, int] | None:
        """``block_history``: rounds per block size, keyed by the block as text; from the verify rounds where
        the steps were not counted (every step a round); None where neither is known (a daemon)."""
        blocks = self.blocks
        if blocks is None and self.rounds is not None:
            blocks = {}
            for _, drafted in self.rounds:
                blocks[drafted + 1] = blocks.get(drafted + 1, 0) + 1
        return None if blocks is None else {str(k): blocks[k] for k in sorted(blocks)}

    def ran_on(self, loop: str, reason: str | None = None) -> None:
        """The decode loop this reply runs on, and why when it is not specchat's own (``decode_loop`` stats)."""
        self.decode_loop = (loop, reason)

    def end_thinking(self) -> None:
        if self.thinking_ended_at is None and self.thinking_tokens:
            self.thinking_ended_at = time.perf_counter()

    def live_due(self) -> bool:
        """True at most every LIVE_INTERVAL_S, so live stats stay ~10 per second."""
        now = time.perf_counter()
        if now - self._last_live >= LIVE_INTERVAL_S:
            self._last_live = now
            return True
        return False

    def snapshot(self) -> dict:
        def ms(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round((b - a) * 1000.0, 1)

        decode_s = (
            self.last_token_at - self.first_token_at
            if self.first_token_at is not None and self.last_token_at is not None
            else 0.0
        )
        # The first token's time is prefill (TTFT); the decode rate counts the rest.
        tok_s = round((self.tokens - 1) / decode_s, 1) if self.tokens > 1 and decode_s > 0 else None
        thinking_end = self.thinking_ended_at or (self.last_token_at if self.thinking_tokens else None)
        acceptance = (
            round(self.accepted / self.drafted, 4) if self.drafted and self.accepted is not None else None
        )
        loop = {} if self.decode_loop is None else dict(zip(("decode_loop", "decode_loop_reason"), self.decode_loop))
        return {
            "ttft_ms": ms(self.started, self.first_token_at),
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "thinking_tokens": self.thinking_tokens,
            "answer_tokens": self.answer_tokens,
            "tokens": self.tokens,
            "tok_s": tok_s,
            "thinking_ms": ms(self.first_token_at, thinking_end) if self.thinking_tokens else None,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance": acceptance,
            "acceptance_by_depth": self.by_depth,
            **round_stats(self.rounds),
            "block_history": self.block_history(),
            "auto_block": self.auto_block,
            **loop,
            "image_tokens": self.image_tokens,
            "vision_ms": self.vision_ms,
            "prefill_ms": self.prefill_ms,
            "elapsed_ms": ms(self.started, time.perf_counter()),
        }
