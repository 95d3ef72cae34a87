"""``draft_block_size: "auto"``'s policy on scripted acceptance with step costs given: the block it picks at
high and low acceptance, drafting off where it does not pay and tried again on schedule, round times measured
as it runs, and what a conversation taught it carried to its next reply."""

import random

import pytest

from engines.block_policy import (
    BLOCKS, DECIDE_EVERY, PLAIN_PROBE, PROBE_ROUNDS, REMEASURE_AFTER, RETRY_FIRST, Learned, Memory, RoundTimes,
    StepCosts, add_histories, block_label,
)

# A CPU-like machine: a head step 0.12 of a plain step, each verified row 0.14 more (benchmarks.rounds' figures).
COSTS = StepCosts(plain=1.0, draft=0.12, verify={k: 1.0 + 0.14 * (k - 1) for k in range(2, 9)})


def play(policy, rounds: int, keep: float, seed: int = 0) -> list[int]:
    """Run ``rounds`` steps where each draft is kept with chance ``keep`` given the one before was (as
    real heads do, acceptance falls with depth); returns the block of every step."""
    rng = random.Random(seed)
    blocks = []
    for _ in range(rounds):
        block = policy.block()
        blocks.append(block)
        if block == 1:
            policy.observe(1)
            continue
        accepted = 0
        while accepted < block - 1 and rng.random() < keep:
            accepted += 1
        policy.observe(block, accepted)
    return blocks


def test_high_acceptance_runs_a_large_block():
    policy = Memory(COSTS).policy("chat")
    blocks = play(policy, 200, keep=0.97)
    assert blocks[-1] >= 6 and all(b > 1 for b in blocks)


def test_middling_acceptance_runs_a_small_block():
    policy = Memory(COSTS).policy("chat")
    blocks = play(policy, 200, keep=0.6)
    assert blocks[-1] in (2, 3)


def test_low_acceptance_turns_drafting_off():
    # A verify costing nearly a plain step per row (quantized on a CPU): little acceptance cannot pay for it.
    dear = StepCosts(plain=1.0, draft=0.12, verify={2: 1.9, 8: 7.0})
    policy = Memory(dear).policy("chat")
    blocks = play(policy, 60, keep=0.3)
    assert blocks[:RETRY_FIRST] == [1] * RETRY_FIRST  # the prior acceptance already says it would not pay
    assert sum(b > 1 for b in blocks) == 2 * PROBE_ROUNDS and blocks[-1] == 1  # only its tries draft


def rejected_before(memory: Memory, rounds: int):
    """A policy for a conversation whose last ``rounds`` rounds at block 4 kept no draft."""
    learned = memory.policy("chat").learned
    for _ in range(rounds):
        learned.observe(0, 3)
    return memory.policy("chat")


def test_drafting_is_tried_again_after_plain_steps_and_less_often_when_it_still_does_not_pay():
    policy = rejected_before(Memory(COSTS), 20)
    assert policy.block() == 1  # starts off
    blocks = play(policy, RETRY_FIRST + PROBE_ROUNDS + 2 * RETRY_FIRST + 1, keep=0.0)
    tries = [i for i, b in enumerate(blocks) if b > 1 and (i == 0 or blocks[i - 1] == 1)]
    assert tries == [RETRY_FIRST, RETRY_FIRST + PROBE_ROUNDS + 2 * RETRY_FIRST]
    assert blocks[RETRY_FIRST:RETRY_FIRST + PROBE_ROUNDS] == [blocks[RETRY_FIRST]] * PROBE_ROUNDS


def test_a_try_that_pays_keeps_drafting_on():
    policy = rejected_before(Memory(COSTS), 5)
    assert play(policy, RETRY_FIRST, keep=0.0) == [1] * RETRY_FIRST
    blocks = play(policy, 60, keep=0.95)  # the text turned easy: the try finds drafting pays
    assert all(b > 1 for b in blocks) and blocks[-1] >= 4


def test_a_change_of_acceptance_mid_reply_changes_the_block():
    policy = Memory(COSTS).policy("chat")
    high = play(policy, 150, keep=0.97)
    low = play(policy, 150, keep=0.5, seed=1)
    assert high[-1] >= 6 and low[-1] <= 3


def test_the_next_reply_in_a_conversation_starts_from_what_it_learned():
    memory = Memory(COSTS)
    fresh = memory.policy("other").block()
    first = memory.policy("chat")
    play(first, 200, keep=0.97)
    assert memory.policy("chat").block() == first.block() >= 6
    assert memory.policy("other").block() == fresh < first.block()
    memory.forget("chat")
    assert memory.policy("chat").block() == fresh


def test_without_given_costs_it_times_plain_steps_first_then_rounds():
    policy = Memory().policy("chat")
    assert policy.speedup(4) is None
    for _ in range(PLAIN_PROBE):
        assert policy.block() == 1
        policy.observe(1, seconds=0.010)
    assert policy.block() in BLOCKS  # unpriced rounds are priced from the plain step at first
    # Rounds that take eight plain steps, where a round yields fewer tokens: drafting turns off.
    for _ in range(4 * DECIDE_EVERY):
        block = policy.block()
        if block == 1:
            break
        policy.observe(block, block - 1, seconds=0.080)
    assert policy.block() == 1


def test_a_blocks_first_round_after_a_change_is_not_timed():
    memory = Memory()
    policy = memory.policy("chat")
    policy.observe(1, seconds=5.0)  # the first step: e.g. compiling
    for _ in range(PLAIN_PROBE - 1):
        policy.observe(1, seconds=0.010)
    assert memory.times.plain() == pytest.approx(0.010)


def test_expected_tokens_follow_acceptance_by_depth():
    learned = Learned()
    for _ in range(400):
        learned.observe(3, 3)
    assert learned.tokens_per_round(4) == pytest.approx(4.0, abs=0.05)
    assert learned.tokens_per_round(2) == pytest.approx(2.0, abs=0.02)
    # Depths never drafted keep as often as the deepest seen.
    assert learned.tokens_per_round(6) == pytest.approx(6.0, abs=0.2)


def test_given_verify_costs_are_interpolated_and_extended():
    costs = StepCosts(plain=1.0, draft=0.1, verify={2: 1.2, 4: 1.6})
    assert costs.round(3) == pytest.approx(2 * 0.1 + 1.4)
    assert costs.round(6) == pytest.approx(5 * 0.1 + 2.0)
    assert StepCosts(1.0, 0.1, {}).round(4) == pytest.approx(0.3 + 1.0)


def test_block_labels_name_what_auto_ran_most():
    assert [block_label(4), block_label("auto"), block_label("auto", {})] == ["4", "auto", "auto"]
    assert block_label("auto", {"1": 3, "4": 20, "5": 2}) == "auto (4)"
    assert block_label("auto", {"1": 30, "3": 4}) == "auto (off)"
    assert block_label(3, {"3": 9}) == "3"
    assert add_histories([{"1": 2, "4": 3}, None, {"4": 1, "10": 1}]) == {"1": 2, "4": 4, "10": 1}
    assert add_histories([None, {}]) is None


def test_no_try_where_no_block_could_pay_even_keeping_every_draft():
    # A round at block k costs more than k plain steps: drafting can never pay, so it is never tried.
    hopeless = StepCosts(plain=1.0, draft=0.0, verify={2: 9.0, 8: 9.0})
    policy = Memory(hopeless).policy("chat")
    assert play(policy, 300, keep=1.0) == [1] * 300


def test_a_plain_step_queued_before_a_try_neither_shortens_the_try_nor_is_timed_as_it():
    memory = Memory(COSTS)
    policy = rejected_before(memory, 20)
    play(policy, RETRY_FIRST, keep=0.0)
    tried = policy.block()
    assert tried > 1
    policy.observe(1, seconds=9.0)  # the step already queued when drafting was picked
    for _ in range(PROBE_ROUNDS - 1):
        policy.observe(tried, 0, seconds=2.0)
        assert policy.block() == tried
    policy.observe(tried, 0, seconds=2.0)
    assert policy.block() == 1  # the whole try ran, then drafting went off again
    assert memory.times.measured(1) is None  # the queued step's time was not counted


def test_a_neighbouring_block_rated_close_is_measured_rather_than_priced():
    """Round times measured, not given: the model prices a block never run at a quarter of a plain step per
    position, where this machine's rounds cost 0.1 (much cheaper). Left to the model, auto would stay shallow;
    measuring the neighbours as it goes, it reaches the block that is truly best here."""
    def seconds(block: int) -> float:
        return 0.010 if block == 1 else 0.010 * (1 + 0.10 * (block - 1))

    keep = 0.8
    truly = {k: sum(keep ** d for d in range(k)) / (seconds(k) / seconds(1)) for k in BLOCKS}
    best = max(truly, key=truly.get)
    policy = Memory().policy("chat")
    rng = random.Random(0)
    blocks = []
    for _ in range(600):
        block = policy.block()
        blocks.append(block)
        accepted = 0
        while block > 1 and accepted < block - 1 and rng.random() < keep:
            accepted += 1
        policy.observe(block, accepted if block > 1 else None, seconds(block))
    assert best >= 5 and blocks[-1] >= best - 1, (best, blocks[-20:])
    assert policy.times.measured(best) is not None


@pytest.mark.parametrize("kept_of_nine,stays_on", [(2, True), (1, False)])
def test_drafting_that_runs_goes_off_only_clearly_below_break_even(kept_of_nine, stays_on):
    """Only block 2 could pay (deeper verifies are dear). Keeping 2 drafts in 9 rates it S ≈ 0.97: within the
    noise of break-even, so drafting stays on; keeping 1 in 9 (S ≈ 0.88) turns it off."""
    costs = StepCosts(plain=1.0, draft=0.12, verify={2: 1.14, 3: 3.0, 8: 8.0})
    memory = Memory(costs)
    learned = memory.policy("chat").learned
    for i in range(20):  # an earlier reply kept half its drafts: this one starts drafting at block 2
        learned.observe(i % 2, 1)
    policy = memory.policy("chat")
    assert policy.block() == 2
    blocks = []
    for i in range(180):
        block = policy.block()
        blocks.append(block)
        if block == 1:
            policy.observe(1)
        else:
            policy.observe(block, 1 if i % 9 < kept_of_nine else 0)
    assert (1 not in blocks) is stays_on, blocks


def test_only_compiled_blocks_are_picked_and_one_compiled_later_is_picked_up():
    """At high acceptance block 8 is best, but while only block 4 is compiled auto runs 4 (a first round at
    another block would compile its steps mid-reply); once the engine has compiled the rest, auto moves on."""
    memory = Memory(COSTS)
    memory.ready = {4}
    policy = memory.policy("chat")
    assert set(play(policy, 60, keep=0.97)) == {4}
    memory.ready.update(BLOCKS)
    blocks = play(policy, 60, keep=0.97, seed=1)
    assert blocks[-1] >= 6


def test_with_no_block_compiled_drafting_waits_off():
    memory = Memory(COSTS)
    memory.ready = set()
    assert set(play(memory.policy("chat"), 40, keep=0.97)) == {1}


def test_a_blocks_time_is_the_mean_of_its_rounds_less_the_slowest():
    """Rounds that kept every draft are cheap and those that rejected dear: the mean prices throughput, where at
    middling acceptance the median is a dear round; the slowest is a stall and is left out."""
    times = RoundTimes()
    for seconds in (1.0, 3.0, 1.0, 3.0, 3.0):
        times.observe(3, seconds)
    assert times.measured(3) == pytest.approx(2.0)  # the median would say 3.0
    times.observe(3, 50.0)
    assert times.measured(3) == pytest.approx(2.2)


@pytest.mark.parametrize("age, measured_again", [(REMEASURE_AFTER, True), (REMEASURE_AFTER - DECIDE_EVERY - 1, False)])
def test_a_neighbours_old_price_is_measured_afresh(age, measured_again):
    """Block 3 was priced by a few slow rounds long ago (a busy machine): once that price is REMEASURE_AFTER rounds
    old and block 3 is rated close to the running block 2, auto measures it again from scratch."""
    memory = Memory()
    for _ in range(4):
        memory.times.observe(1, 0.010)
    for _ in range(4):
        memory.times.observe(3, 0.018)  # rated within EXPLORE_WITHIN of block 2
    for _ in range(age):
        memory.times.observe(2, 0.013)
    policy = memory.policy("chat")
    assert policy.block() == 2
    for i in range(DECIDE_EVERY):
        policy.observe(2, int(i % 4 != 0), 0.013)
    assert (policy.block() == 3 and memory.times.measured(3) is None) is measured_again, policy.block()


def _every_row_a_step(block: int) -> float:
    """Seconds of a round on a machine where each verified row costs about a plain step (MLX's quantized products
    on a CPU: the demo model's mixed 3/6 conversion measured 3.05, 3.9, 4.9, 5.9 and 7.1 plain steps at blocks
    3-7)."""
    return 0.184 * (1 + 1.02 * (block - 1))


def test_a_block_never_run_is_priced_on_the_line_through_what_was_measured():
    times = RoundTimes()
    for _ in range(6):
        times.observe(1, _every_row_a_step(1))
        times.observe(4, _every_row_a_step(4))
    for block in (2, 3, 5, 7, 8):  # through the plain step and block 4, the nearest measured
        assert times.round(block) == pytest.approx(_every_row_a_step(block), rel=0.02), block
    for _ in range(6):
        times.observe(7, _every_row_a_step(7) * 1.1)  # a dearer round than the line: between 4 and 7, on theirs
    assert times.round(5) == pytest.approx((2 * _every_row_a_step(4) + _every_row_a_step(7) * 1.1) / 3, rel=1e-9)


def test_where_every_row_costs_a_step_blocks_compiled_later_are_not_tried_on_a_hopeful_price():
    """The engine compiles auto's blocks one by one after its warm-up: the first reply has only block 4, the next
    has them all. Where each verified row costs a plain step no block pays, even keeping 97% of drafts; what
    block 4 cost says what the others will, so the next reply runs plain steps and loses nothing to trying."""
    memory = Memory()
    memory.ready = {4}
    rng = random.Random(5)

    def reply(conversation: str, steps: int) -> tuple[float, int]:
        policy, seconds, tokens = memory.policy(conversation), 0.0, 0
        while tokens < steps:
            block = policy.block()
            accepted = None
            if block > 1:
                accepted = 0
                while accepted < block - 1 and rng.random() < 0.97:
                    accepted += 1
            took = _every_row_a_step(block)
            policy.observe(block, accepted, took)
            seconds, tokens = seconds + took, tokens + (1 if block == 1 else accepted + 1)
        return seconds, tokens

    reply("first", 128)
    memory.ready.update(BLOCKS)
    seconds, tokens = reply("second", 128)
    assert seconds <= 1.03 * tokens * _every_row_a_step(1), seconds / (tokens * _every_row_a_step(1))


def test_the_wait_before_trying_again_is_kept_across_replies():
    """A conversation where drafting does not pay doubles the wait with each try; the next reply, another
    conversation's, goes off as soon as it learns its own acceptance is low, and then waits as long as the model's
    last tries taught, where starting the wait afresh would try again after RETRY_FIRST plain steps."""
    memory = Memory(COSTS)
    play(memory.policy("first"), 400, keep=0.2)
    assert memory.retry.after > 4 * RETRY_FIRST
    second = play(memory.policy("second"), 200, keep=0.05, seed=1)
    off = second.index(1)
    assert len(second) - off > 2 * RETRY_FIRST and set(second[off:]) == {1}, second
