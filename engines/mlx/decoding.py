"""specchat's own decode loop: plain steps or MTP draft/verify rounds on compiled steps.

A round drafts ``block - 1`` tokens with the MTP head, verifies the block
(the pending token and the drafts) in one target step, keeps the drafts the
target agrees with plus the target's own next token, and rolls the rest back
by position (attention) and by picking the recurrent state after the last kept
token (gated delta). One host sync per round: reading the verified tokens.

With ``draft_block_size: "auto"`` a policy (engines/block_policy.py) picks each round's block from the
acceptance and the round times seen, or runs plain steps while drafting does not pay. Plain steps then keep
the head's inputs (each step's token and hidden state), and the head reads them when drafting starts again,
so it misses no position.

Greedy rounds keep the longest agreeing prefix, so the output is the plain
loop's token for token. Sampling uses the standard speculative rule (accept a
draft with probability min(1, p/q), else resample from max(0, p - q)), so the
output follows the target's distribution exactly.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .cuda import KernelChoice
from .sampling import Sampling, probabilities, sample
from .stepper import TAIL, DrafterCaches, DrafterStepper, ImageFeed, TargetCaches, TargetStepper

__all__ = ["Decoder", "DecodeState", "Sampling", "Step", "probabilities", "sample"]  # the tests draw from here too


@dataclass
class DecodeState:
    """A conversation's caches: the ids the target holds, and the token waiting to be fed."""

    target: TargetCaches
    drafter: DrafterCaches | None
    ids: list[int] = field(default_factory=list)  # tokens in the target cache (len == target.offset)
    images: tuple[str, ...] = ()  # the content (sha256) of the images whose placeholders ``ids`` hold, in order

    def nbytes(self) -> int:
        return self.target.nbytes() + (self.drafter.nbytes() if self.drafter else 0)

    def snapshot(self) -> "DecodeState":
        return DecodeState(self.target.snapshot(), self.drafter.snapshot() if self.drafter else None, list(self.ids),
                           self.images)


@dataclass
class Step:
    """Tokens one step or round produced, in order."""

    tokens: list[int]
    drafted: list[bool]  # per token: it came from an accepted draft
    accepted: int | None = None  # drafts kept this round (None: a plain step)
    proposed: int | None = None  # drafts proposed this round
    block: int | None = None  # the round's block (1: a plain step; None: the prompt's first token)


class Decoder:
    """Runs turns on one model (and its MTP head, when there is one)."""

    def __init__(self, model, drafter=None, kernels: KernelChoice = KernelChoice()):
        """On mlx-vlm's ``model`` and MTP head ``drafter``, whose parts the seam copies once (qwen35.py), their
        products on ``kernels`` where specchat's CUDA kernels apply."""
        from . import qwen35

        self.target = TargetStepper(qwen35.body(model, kernels))
        self.drafter = (DrafterStepper(qwen35.mtp_head(drafter, kernels), self.target) if drafter is not None
                        else None)
        self.vision = qwen35.vision(model)  # None without a vision tower

    def new_state(self) -> DecodeState:
        return DecodeState(self.target.new_caches(), self.drafter.new_caches() if self.drafter else None)

    def feed(self, state: DecodeState, ids: list[int], chunk: int, sampling: Sampling,
             cancelled: Callable[[], bool] = lambda: False, images: ImageFeed | None = None):
        """Feed the prompt ``ids`` (extending ``state.ids``) and return the first token (1, 1), lazily.
        ``images``: the new ids hold image placeholders, fed as ``images`` says (``image_feed``).

        None when cancelled between prefill chunks.
        """
        import mlx.core as mx

        if ids[: len(state.ids)] != state.ids or len(ids) <= len(state.ids):
            raise ValueError("the prompt must extend the ids the cache holds")
        new = ids[len(state.ids):]
        hidden = self.target.prefill(state.target, new, chunk, cancelled, images)
        if hidden is None:
            return None
        state.ids = list(ids)
        logits = self.target.head(hidden[:, -1:])
        first = (mx.argmax(logits, axis=-1).astype(mx.int32) if sampling.greedy
                 else sample(probabilities(logits, sampling)))
        if self.drafter is not None:
            if state.drafter is None:  # a plain turn left the head behind: start it afresh
                state.drafter = self.drafter.new_caches()
            # The head reads (token i+1, hidden i) for the latest fed positions (the prefill's tail).
            pairs = mx.concatenate([mx.array([new[1:]], dtype=mx.int32), first], axis=1)
            self.drafter.accept(state.drafter, 0, pairs[:, -hidden.shape[1]:], hidden, sampling)
        return first

    def image_feed(self, ids: list[int], start: int, features, grid_thw) -> ImageFeed:
        """How ``ids[start:]`` is fed when it holds image placeholders: ``features`` (the vision tower's, for
        the placeholders from ``start`` on) in place of their embeddings, at the M-RoPE positions mlx-vlm's
        model gives the whole prompt (``grid_thw``: every image of ``ids``)."""
        import mlx.core as mx

        placeholders = ids[start:].count(self.vision.image_token)
        if features.shape[0] != placeholders:
            raise ValueError(f"{features.shape[0]} image features for {placeholders} placeholders")
        new = mx.array([ids[start:]], dtype=mx.int32)
        embeds = self.target.body.embed(new)
        # The placeholders take the features in order, as mlx-vlm's masked scatter places them.
        placeholder = new[0] == self.vision.image_token
        order = mx.maximum(mx.cumsum(placeholder.astype(mx.int32)) - 1, 0)
        embeds = mx.where(placeholder[None, :, None], features.astype(embeds.dtype)[order][None], embeds)
        positions, delta = self.vision.rope_index(mx.array([ids], dtype=mx.int32), grid_thw)
        return ImageFeed(embeds, positions[:, :, start:].astype(mx.int32), int(delta.reshape(-1)[0].item()))

    def warm_up(self, state: DecodeState, ids: list[int], block: int) -> None:
        """Feed ``ids`` into ``state``, then compile the steps a reply at ``block`` uses (on a copy)."""
        first = self.feed(state, ids, 0, Sampling())
        for size in {1, block if self.drafter is not None else 1}:
            for _ in self.decode(state.snapshot(), first, max_tokens=4 * size, block=size, sampling=Sampling(),
                                 stop_ids=set(), cancelled=lambda: False):
                pass

    def decode(self, state: DecodeState, first, *, max_tokens: int, block, sampling: Sampling,
               stop_ids: set[int], cancelled: Callable[[], bool]) -> Iterator[Step]:
        """Yield steps until a stop token, ``max_tokens`` or cancel; ``first`` (from ``feed``) comes first.
        ``block``: the draft block (1: plain steps), or a ``BlockPolicy`` that picks it round by round.

        ``state.ids`` always lists what the target cache holds, so a next turn
        (or phase) that extends the yielded tokens can be fed on this state.
        """
        import mlx.core as mx

        token = int(first.item())
        yield Step([token], [False])
        limit = _Limit(max_tokens - 1, stop_ids)
        if token in stop_ids or limit.left <= 0:
            return
        if self.drafter is not None and state.drafter is not None and not isinstance(block, int):
            rounds = self._auto(state, first, block, sampling, limit)
        elif self.drafter is not None and state.drafter is not None and block >= 2:
            rounds = self._rounds(state, token, block, sampling, limit)
        else:
            state.drafter = None  # the head misses these positions: a later drafted turn re-primes it
            rounds = self._plain(state, first, sampling)
        try:
            for step in rounds:
                yield step
                if limit.done(step.tokens) or cancelled():
                    return
        finally:
            rounds.close()  # a round planned ahead is rolled back, so ``state`` matches ``state.ids``

    def _plain(self, state: DecodeState, pending, sampling: Sampling) -> Iterator[Step]:
        """One target step per token, the next queued before the current token is read."""
        import mlx.core as mx

        def step(token):
            result = self.target.verify(state.target, token, greedy=sampling.greedy)
            self.target.commit(state.target, result, 1)
            return result.tokens if sampling.greedy else sample(probabilities(result.logits, sampling))

        state.ids.append(int(pending.item()))
        nxt = step(pending)
        mx.async_eval(nxt)
        while True:
            after = step(nxt)
            mx.async_eval(after)
            token = int(nxt.item())
            state.ids.append(token)  # the queued step fed it
            yield Step([token], [False], block=1)
            nxt = after

    def _rounds(self, state: DecodeState, token: int, block: int, sampling: Sampling,
                limit: "_Limit", policy=None) -> Iterator[Step]:
        """Draft/verify rounds. While a greedy round computes, the next one is built on copies
        of the caches as if every draft were accepted; it is used when that is what happened.

        The next round is always planned before a step is yielded; when the caller stops,
        that round is rolled back (its verify kept none), so ``state`` matches ``state.ids``.

        ``policy``: each round is timed and told to it, and the next runs at the block it picks; when it picks
        plain steps the rounds end, returning the pending token (1, 1), with no round planned.
        """
        import mlx.core as mx

        planned = self._dispatch(self._plan(state, mx.array([[token]], dtype=mx.int32), block, sampling), sampling)
        last = time.perf_counter()
        try:
            while True:
                drafts, draft_probs, verified = planned
                guess = None
                if sampling.greedy:
                    guess = self._assume_accepted(state, drafts, verified, block, sampling)
                    proposed, targets = drafts[0].tolist(), verified.tokens[0].tolist()
                    accepted = 0
                    while accepted < block - 1 and proposed[accepted] == targets[accepted]:
                        accepted += 1
                    out = proposed[:accepted] + [targets[accepted]]
                else:
                    out, accepted = _speculative_sample(drafts, draft_probs,
                                                        probabilities(verified.logits, sampling), block)
                kept = limit.cut(out)
                out = out[:kept]
                state.ids.append(token)
                state.ids.extend(out[:-1])
                token = out[-1]
                from_draft = min(accepted, kept)
                step = Step(out, [True] * from_draft + [False] * (kept - from_draft), accepted, block - 1, block)
                following = block
                if policy is not None:
                    now = time.perf_counter()
                    policy.observe(block, accepted, now - last)
                    last, following = now, policy.block()
                if guess is not None and kept == block and following == block:
                    state.target, state.drafter, planned = guess
                else:
                    self.target.commit(state.target, verified, kept)
                    reuse = min(accepted, block - 2, kept - 1)
                    self.drafter.accept(state.drafter, reuse, mx.array([out[reuse:]], dtype=mx.int32),
                                        verified.hidden[:, reuse:kept], sampling)
                    if following == 1:
                        planned = None
                        yield step
                        return mx.array([[token]], dtype=mx.int32)
                    block = following
                    planned = self._plan(state, mx.array([[token]], dtype=mx.int32), block, sampling)
                # The next round computes while the caller handles this one's tokens.
                self._dispatch(planned, sampling)
                yield step
        finally:
            if planned is not None:
                self.target.commit(state.target, planned[2], 0)

    def _auto(self, state: DecodeState, first, policy, sampling: Sampling, limit: "_Limit") -> Iterator[Step]:
        """Rounds at the blocks ``policy`` picks, and plain steps while it has drafting off."""
        pending, pairs = first, deque(maxlen=TAIL)
        try:
            while True:
                if policy.block() == 1:
                    pending = yield from self._plain_steps(state, pending, policy, sampling, pairs)
                else:
                    self._prime(state, pairs, sampling)
                    pending = yield from self._rounds(state, int(pending.item()), policy.block(), sampling, limit,
                                                      policy)
        finally:
            self._prime(state, pairs, sampling)  # a next turn's feed finds the head caught up

    def _plain_steps(self, state: DecodeState, pending, policy, sampling: Sampling, pairs: deque):
        """Plain steps while ``policy`` keeps drafting off, each queued before the last is read (as ``_plain``);
        returns the pending token (1, 1) once it picks a block. Each step's (token, hidden) pair, what the head
        reads, is added to ``pairs``."""
        import mlx.core as mx

        def step(token):
            result = self.target.verify(state.target, token, greedy=sampling.greedy)
            self.target.commit(state.target, result, 1)
            return (result.tokens if sampling.greedy else sample(probabilities(result.logits, sampling))), result.hidden

        state.ids.append(int(pending.item()))
        nxt, hidden = step(pending)
        mx.async_eval(nxt)
        last = time.perf_counter()
        while True:
            more = policy.block() == 1  # decided before reading, so the next step is queued meanwhile
            if more:
                after = step(nxt)
                mx.async_eval(after[0])
            token = int(nxt.item())
            now = time.perf_counter()
            policy.observe(1, None, now - last)
            last = now
            pairs.append((nxt, hidden))
            if not more:
                yield Step([token], [False], block=1)
                return nxt
            state.ids.append(token)  # the queued step fed it
            yield Step([token], [False], block=1)
            nxt, hidden = after

    def _prime(self, state: DecodeState, pairs: deque, sampling: Sampling) -> None:
        """The head reads the (token, hidden) pairs that plain steps left (the latest ``TAIL``)."""
        import mlx.core as mx

        if not pairs:
            return
        tokens = mx.concatenate([token for token, _ in pairs], axis=1)
        hidden = mx.concatenate([h for _, h in pairs], axis=1)
        self.drafter.accept(state.drafter, 0, tokens, hidden, sampling)
        pairs.clear()

    @staticmethod
    def _dispatch(planned, sampling: Sampling):
        """Start computing a planned round without waiting for it."""
        import mlx.core as mx

        drafts, _, verified = planned
        mx.async_eval(drafts, verified.tokens if sampling.greedy else verified.logits)
        return planned

    def _plan(self, state: DecodeState, pending, block: int, sampling: Sampling):
        """A round's graph: drafts from the head, then the target over the pending token and them."""
        import mlx.core as mx

        drafts, draft_probs = self.drafter.draft(state.drafter, block, sampling)
        verified = self.target.verify(state.target, mx.concatenate([pending, drafts], axis=1),
                                      greedy=sampling.greedy)
        return drafts, draft_probs, verified

    def _assume_accepted(self, state: DecodeState, drafts, verified, block: int, sampling: Sampling):
        """The next round, built lazily on copies of the caches as if all drafts were kept."""
        import mlx.core as mx

        chain = block - 2
        guess = DecodeState(state.target.snapshot(), state.drafter.snapshot())
        self.target.commit(guess.target, verified, block)
        out = mx.concatenate([drafts, verified.tokens[:, -1:]], axis=1)
        self.drafter.accept(guess.drafter, chain, out[:, chain:], verified.hidden[:, chain:block], sampling)
        return guess.target, guess.drafter, self._plan(guess, out[:, -1:], block, sampling)


class _Limit:
    """How many more tokens a reply may have, and which tokens end it."""

    def __init__(self, left: int, stop_ids: set[int]):
        self.left, self.stop_ids = left, stop_ids

    def cut(self, tokens: list[int]) -> int:
        """How many of ``tokens`` to keep: up to the first stop token, within the limit."""
        keep = min(len(tokens), self.left)
        for i, t in enumerate(tokens[:keep]):
            if t in self.stop_ids:
                return i + 1
        return keep

    def done(self, tokens: list[int]) -> bool:
        self.left -= len(tokens)
        return self.left <= 0 or tokens[-1] in self.stop_ids


def _speculative_sample(drafts, draft_probs, target_probs, block: int) -> tuple[list[int], int]:
    """The standard accept/resample rule over one block; returns (tokens, drafts accepted)."""
    import mlx.core as mx

    n = block - 1
    picked = mx.take_along_axis(target_probs[0, :n], drafts[0][:, None], axis=-1)[:, 0]
    proposed_p = mx.take_along_axis(draft_probs[0], drafts[0][:, None], axis=-1)[:, 0]
    ratio = mx.minimum(picked / mx.maximum(proposed_p, 1e-30), 1.0)
    coins = mx.random.uniform(shape=(n,))
    mx.eval(ratio, coins, drafts)
    proposed, ratio, coins = drafts[0].tolist(), ratio.tolist(), coins.tolist()
    accepted = 0
    while accepted < n and coins[accepted] < ratio[accepted]:
        accepted += 1
    if accepted < n:
        residual = mx.maximum(target_probs[0, accepted] - draft_probs[0, accepted], 0.0)
        total = residual.sum()
        residual = mx.where(total > 0, residual / mx.maximum(total, 1e-30), target_probs[0, accepted])
        last = sample(residual[None])
    else:
        last = sample(target_probs[:, n])
    return proposed[:accepted] + [int(last.item())], accepted
