"""``draft_block_size: "auto"``: which draft block the next round runs at, re-decided as a reply goes.

A round at block k drafts k − 1 tokens and verifies them with the pending token in one target step; it yields
the drafts kept (a prefix) plus the target's own token. With the acceptance learned so far and what a round
costs on this machine and model, the expected speed-up over plain decoding at block k is

    S(k) = E[tokens per round](k) · t_plain ÷ t_round(k),   E(k) = 1 + Σ_{d<k} P(the first d drafts are kept)

and the policy runs the k in ``BLOCKS`` with the largest S, deciding again every ``DECIDE_EVERY`` rounds (a new
block must promise ``SWITCH_GAIN`` times the running one's S), or plain steps (block 1: drafting off) while the
best S is below 1, trying drafting again now and then (drafting that runs goes off only below ``OFF_BELOW``: near
1 the estimate is noise, and going off by mistake costs far more than drafting on at S ≈ 1): after
``RETRY_FIRST`` plain steps, then twice as many after each try that did not pay, up to ``RETRY_MOST`` (a try
that pays sets the wait back to ``RETRY_FIRST``; the wait is kept per model, across replies); a try runs
``PROBE_ROUNDS`` rounds at the block the model rates best among those that would pay were every draft kept (none:
no try, and the wait doubles), then decides again.

Acceptance is learned per draft depth as the chance that depth d is kept when depth d − 1 was, counted over
the recent rounds (older ones fade by ``FADE`` a round); a depth not yet drafted is taken to keep as often as
the one before it. It is kept per conversation (``Learned``), so a next reply starts from it.

Round costs (``RoundTimes``) are what rounds take as they run, per block (the mean of the last ``TIME_SAMPLES``
less the slowest; the first round after a change of block is not counted: it is not pipelined, and may compile the
block's steps): draft steps, verify, rejections' rollback and the host's share alike. A block not yet run
is priced from given step costs when there are any (``t_plain``, ``t_draft``, ``t_verify(k)``: t_round(k) =
(k − 1)·t_draft + t_verify(k)), scaled to the nearest block that ran; else on a line through what was measured
(between the measured blocks either side of it, or through the plain step and the nearest measured block), and
before any block ran at t_plain · (1 + ``PRIOR_SLOPE`` · (k − 1)). A neighbour of the best block rated close to it
is measured when never measured, and afresh when its times are ``REMEASURE_AFTER`` rounds old. Without a measured
plain step the policy first runs ``PLAIN_PROBE`` plain steps to measure one.

Only blocks whose steps are compiled are picked (``Memory.ready``; None: every block): the first round at a new
block compiles its steps, seconds on a GPU, so the engine compiles the others in the background after its warm-up
and auto meanwhile chooses among those ready.

Pure Python, so the engines, the fake engine and the tests share it.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque
from dataclasses import dataclass, field

AUTO = "auto"
BLOCKS = range(2, 9)  # the blocks auto chooses from: deeper drafts seldom pay, and each block compiles its steps
START_BLOCK = 4  # the block compiled at warm-up for auto: the one a prior acceptance rates near best
PRIOR_ACCEPT = 0.7  # the first depth's acceptance before any round (as demo and peer MTP heads keep, or better)
PRIOR_WEIGHT = 2.0  # rounds the prior weighs against what is seen
PRIOR_SLOPE = 0.25  # an unpriced round's extra cost per block position, in plain steps (c ≈ 0.12 + a verify row)
FADE = 0.98  # per round: about the last 50 rounds count
DECIDE_EVERY = 4  # rounds between decisions while drafting
SWITCH_GAIN = 1.03  # a block replaces the running one only when it promises this much more
OFF_BELOW = 0.95  # drafting that runs stops only when the best S is below this (off, it restarts at S ≥ 1)
TIME_SAMPLES = 16
MIN_SAMPLES = 3  # a block's own times are used from this many on
PLAIN_PROBE = 4  # plain steps run first when no plain step has been timed (the first is not counted)
RETRY_FIRST = 16  # plain steps before drafting is tried again
RETRY_MOST = 256
PROBE_ROUNDS = 4
# A neighbouring block never run is priced by a model; when it is rated within this of the best, a few rounds
# measure it, since a model's price off by a few percent otherwise keeps auto one block too shallow or deep.
EXPLORE_WITHIN = 0.9
EXPLORE_ROUNDS = MIN_SAMPLES + 1  # its first round is not timed
# A neighbour's time measured this many rounds ago is measured again (afresh) when it is rated close: a few early
# rounds (the machine busy, caches cold) otherwise price it for good, and auto never returns to a better block.
REMEASURE_AFTER = 64
LEARNED_CONVERSATIONS = 64


def most_run(history: dict[str, int] | None) -> int | None:
    """The block that ran the most rounds in a ``block_history`` (1: drafting off; a tie goes to the larger
    block); None without one."""
    if not history:
        return None
    return int(max(history.items(), key=lambda item: (item[1], int(item[0])))[0])


def block_label(block: int | str, history: dict[str, int] | None = None) -> str:
    """How a block setting is named: "4", "auto", or with what auto ran most "auto (4)" or "auto (off)"."""
    chose = most_run(history) if block == AUTO else None
    if chose is None:
        return str(block)
    return f"{AUTO} ({'off' if chose == 1 else chose})"


def add_histories(histories) -> dict[str, int] | None:
    """Several replies' ``block_history`` summed (None when none has one)."""
    known = [h for h in histories if h]
    if not known:
        return None
    total: dict[str, int] = {}
    for history in known:
        for block, rounds in history.items():
            total[block] = total.get(block, 0) + rounds
    return {k: total[k] for k in sorted(total, key=int)}


@dataclass(frozen=True)
class StepCosts:
    """Step costs given in seconds: a plain target step, one head step, and verifies of k positions (a k not
    given is interpolated between, or extended from, the nearest given ones; k = 1 is the plain step)."""

    plain: float
    draft: float
    verify: dict[int, float]

    def round(self, block: int) -> float:
        return (block - 1) * self.draft + self.verify_at(block)

    def verify_at(self, block: int) -> float:
        points = {1: self.plain, **self.verify}
        if block in points:
            return points[block]
        lower = sorted(k for k in points if k < block)
        upper = sorted(k for k in points if k > block)
        if lower and upper:
            k0, k1 = lower[-1], upper[0]
        elif len(lower) >= 2:
            k0, k1 = lower[-2], lower[-1]
        else:
            return points[lower[-1]]
        return points[k0] + (points[k1] - points[k0]) * (block - k0) / (k1 - k0)


class RoundTimes:
    """Seconds per round at each block on this machine and model, as measured, with a model for the rest."""

    def __init__(self, given: StepCosts | None = None):
        self.given = given
        self._seen: dict[int, deque] = {}
        self._rounds = 0  # rounds timed so far, at any block
        self._last: dict[int, int] = {}  # block -> ``_rounds`` at its latest timed round

    def observe(self, block: int, seconds: float) -> None:
        self._seen.setdefault(block, deque(maxlen=TIME_SAMPLES)).append(seconds)
        self._rounds += 1
        self._last[block] = self._rounds

    def age(self, block: int) -> int | None:
        """Rounds timed since ``block``'s latest (None: never timed)."""
        return self._rounds - self._last[block] if block in self._last else None

    def restart(self, block: int) -> None:
        """Forget ``block``'s times, so that the next ones measure it afresh."""
        self._seen.pop(block, None)

    def measured(self, block: int) -> float | None:
        seen = self._seen.get(block)
        if seen is None or len(seen) < MIN_SAMPLES:
            return None
        # The mean, as tokens per second go, not the median: a round that kept every draft was planned while the
        # one before computed and is cheap, one that rejected is dear, and at middling acceptance the median round
        # of a deep block is a dear one. The slowest time is left out: a stall, not the block's cost.
        return statistics.fmean(sorted(seen)[:-1])

    def plain(self) -> float | None:
        measured = self.measured(1)
        return measured if measured is not None else (self.given.plain if self.given else None)

    def round(self, block: int) -> float | None:
        measured = self.measured(block)
        if measured is not None:
            return measured
        ran = sorted(k for k in self._seen if k > 1 and self.measured(k) is not None)
        if self.given is not None:
            model = self.given.round(block)
            if ran:  # what the given costs miss (overhead, rollback) is scaled in from the nearest block that ran
                near = min(ran, key=lambda k: (abs(k - block), k))
                model *= self.measured(near) / self.given.round(near)
            return model
        plain = self.plain()
        if plain is None:
            return None
        if not ran:
            return plain * (1 + PRIOR_SLOPE * (block - 1))
        # On a line: between the measured blocks either side, else through the plain step (block 1) and the
        # nearest measured block. A round's extra cost per position is the machine's (a few hundredths of a plain
        # step where a verify's rows come almost free, a whole one where each row costs a step, as MLX's quantized
        # products on a CPU do), and a line through what was measured follows it where a fixed slope does not.
        below = [k for k in ran if k < block]
        above = [k for k in ran if k > block]
        if below and above:
            k0, k1 = below[-1], above[0]
            t0, t1 = self.measured(k0), self.measured(k1)
        else:
            k0, t0 = 1, plain
            k1 = below[-1] if below else above[0]
            t1 = self.measured(k1)
        return t0 + (t1 - t0) * (block - k0) / (k1 - k0)


@dataclass
class Learned:
    """A conversation's acceptance by depth: faded counts of rounds that reached depth d and kept it."""

    reached: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)

    def observe(self, accepted: int, drafted: int) -> None:
        self.reached = [n * FADE for n in self.reached]
        self.kept = [n * FADE for n in self.kept]
        while len(self.reached) < drafted:
            self.reached.append(0.0)
            self.kept.append(0.0)
        for d in range(min(accepted + 1, drafted)):
            self.reached[d] += 1
            if d < accepted:
                self.kept[d] += 1

    def keep_rates(self, depth: int) -> list[float]:
        """The chance of keeping depth 1, 2, …, ``depth`` given the one before was kept."""
        rates, prior = [], PRIOR_ACCEPT
        for d in range(depth):
            reached = self.reached[d] if d < len(self.reached) else 0.0
            kept = self.kept[d] if d < len(self.kept) else 0.0
            prior = (kept + PRIOR_WEIGHT * prior) / (reached + PRIOR_WEIGHT)
            rates.append(prior)
        return rates

    def tokens_per_round(self, block: int) -> float:
        expected, chance = 1.0, 1.0
        for rate in self.keep_rates(block - 1):
            chance *= rate
            expected += chance
        return expected


@dataclass
class Retry:
    """How many plain steps drafting that is off waits before it is tried again: doubled by each try that did not
    pay, set back by one that did. Kept per model, not per reply: on a machine where drafting does not pay, each
    reply would otherwise try again early and lose the try's rounds, and the change into drafting and back,
    every time."""

    after: int = RETRY_FIRST

    def failed(self) -> None:
        self.after = min(2 * self.after, RETRY_MOST)

    def paid(self) -> None:
        self.after = RETRY_FIRST


class Memory:
    """What auto learned on one engine: round times for the machine and model, how long to wait before trying
    drafting again, acceptance per conversation."""

    def __init__(self, given: StepCosts | None = None):
        self.times = RoundTimes(given)
        self.retry = Retry()
        # The blocks whose steps are compiled, added to as the engine compiles more; None: every block.
        self.ready: set[int] | None = None
        self._learned: OrderedDict[str, Learned] = OrderedDict()

    def policy(self, conversation_id: str) -> "BlockPolicy":
        learned = self._learned.pop(conversation_id, None) or Learned()
        self._learned[conversation_id] = learned
        while len(self._learned) > LEARNED_CONVERSATIONS:
            self._learned.popitem(last=False)
        return BlockPolicy(learned, self.times, self.ready, self.retry)

    def forget(self, conversation_id: str) -> None:
        self._learned.pop(conversation_id, None)


class BlockPolicy:
    """One reply's choices: ``block()`` before each round (1: a plain step), ``observe`` after it."""

    def __init__(self, learned: Learned, times: RoundTimes, ready: set[int] | None = None,
                 retry: Retry | None = None):
        self.learned = learned
        self.times = times
        self._ready = ready  # shared with the engine, which adds blocks as it compiles them
        self.retry = retry or Retry()
        self._since_decided = 0
        self._fresh = True  # the next round's time is not counted (first after a start or a change)
        self._probing = 0  # rounds left in a try of drafting
        self._off_steps = 0
        if times.plain() is None:
            self._block, self._plain_probe = 1, PLAIN_PROBE
        else:
            self._block, self._plain_probe = 1, 0
            self._set(self._best() or 1)

    def block(self) -> int:
        return self._block

    def speedup(self, block: int) -> float | None:
        """S(block): expected tokens per second at ``block`` over plain steps'; None while costs are unknown."""
        plain, round_s = self.times.plain(), self.times.round(block)
        if plain is None or not round_s:
            return None
        return self.learned.tokens_per_round(block) * plain / round_s

    def _best(self, running: bool = False) -> int | None:
        """The block with the largest S when drafting pays (S ≥ 1; ``running``: drafting runs, S ≥ OFF_BELOW),
        else None."""
        rated = [(s, k) for k in self._blocks() if (s := self.speedup(k)) is not None]
        if not rated:
            return None
        speedup, block = max(rated, key=lambda item: (item[0], -item[1]))
        return block if speedup >= (OFF_BELOW if running else 1.0) else None

    def observe(self, block: int, accepted: int | None = None, seconds: float | None = None) -> None:
        """A round at ``block`` kept ``accepted`` drafts (None: a plain step) in ``seconds`` (None: not timed).

        A step queued before the block last changed (plain steps run one ahead) only teaches acceptance."""
        if block != self._block:
            if block > 1 and accepted is not None:
                self.learned.observe(accepted, block - 1)
            return
        if seconds is not None and not self._fresh:
            self.times.observe(block, seconds)
        self._fresh = False
        if block > 1 and accepted is not None:
            self.learned.observe(accepted, block - 1)
        if self._plain_probe:
            self._plain_probe -= 1
            if not self._plain_probe:
                self._set(self._best() or self._start_off())
            return
        if self._block == 1:
            self._off_steps += 1
            if self._off_steps >= self.retry.after:
                favourite = self._favourite()
                if favourite is None:  # no block could pay even were every draft kept: no try, wait longer
                    self.retry.failed()
                    self._off_steps = 0
                    return
                self._probing = PROBE_ROUNDS
                self._set(favourite)
            return
        if self._probing:
            self._probing -= 1
            if self._probing:
                return
            best = self._best()
            if best:
                self.retry.paid()
            else:
                self.retry.failed()
            self._set(best or self._start_off())
            return
        self._since_decided += 1
        if self._since_decided < DECIDE_EVERY:
            return
        self._since_decided = 0
        best = self._best(running=True)
        if best is None:
            self._set(self._start_off())
            return
        unpriced = self._neighbour_to_measure(best)
        if unpriced is not None:
            self.times.restart(unpriced)
            self._probing = EXPLORE_ROUNDS
            self._set(unpriced)
        elif best != self._block and self.speedup(best) > SWITCH_GAIN * (self.speedup(self._block) or 0.0):
            self._set(best)

    def _neighbour_to_measure(self, best: int) -> int | None:
        """A block next to ``best`` whose round was never timed on this machine and model, or not for
        ``REMEASURE_AFTER`` rounds, and that is rated close to it: the one to measure (None with costs given, or
        when both neighbours are freshly known or far)."""
        if self.times.given is not None:
            return None
        rated = self.speedup(best)
        near = [(s, k) for k in (best - 1, best + 1) if k in self._blocks() and k != self._block
                and (self.times.measured(k) is None or self.times.age(k) >= REMEASURE_AFTER)
                and (s := self.speedup(k)) is not None and s >= EXPLORE_WITHIN * rated]
        return max(near)[1] if near else None

    def _favourite(self) -> int | None:
        """The block to try drafting at: the one rated best among those that would pay were every draft kept
        (k tokens a round); None when none would."""
        plain = self.times.plain()
        rated = [(s, k) for k in self._blocks() if (s := self.speedup(k)) is not None
                 and k * plain >= self.times.round(k)]
        return max(rated, key=lambda item: (item[0], -item[1]))[1] if rated else None

    def _blocks(self) -> list[int]:
        """The blocks it may pick now: those of ``BLOCKS`` whose steps are compiled."""
        return [k for k in BLOCKS if self._ready is None or k in self._ready]

    def _start_off(self) -> int:
        self._off_steps = 0
        return 1

    def _set(self, block: int) -> None:
        if block != self._block:
            self._fresh = True
            self._since_decided = 0
        self._block = block
