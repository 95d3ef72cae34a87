"""Lanes, their schedule and tally, the shared measures, and the verify rounds engines report."""

from engines import Answer, Done, GenerationOptions, Message, Thinking, Turn, guarded
from engines.fake import ANSWER, THINKING, FakeEngine
from engines.stats import rounds_from_depths
from webapp.measurement.lanes import Lane, LaneRun, block_lane, schedule, tally
from webapp.measurement.measures import divergence, pooled_depths, spread

OPTIONS = GenerationOptions()


def lanes(*keys) -> list[Lane]:
    return [block_lane(k, OPTIONS) for k in keys]


def test_schedule_interleaves_and_turns_the_order_each_run():
    off, on = Lane("off", {"lane": "off"}, OPTIONS), Lane("on", {"lane": "on"}, OPTIONS)
    order = [(run, lane.key) for run, _, lane in schedule([off, on], 4)]
    assert order == [(0, "off"), (0, "on"), (1, "on"), (1, "off"), (2, "off"), (2, "on"), (3, "on"), (3, "off")]
    three = [lane.key for _, _, lane in schedule(lanes(1, 2, 3), 3)]
    assert three == [1, 2, 3, 2, 3, 1, 3, 1, 2]
    # Every prompt gets every lane in a run, in that run's order.
    two_prompts = [(run, prompt, lane.key) for run, prompt, lane in schedule(lanes(1, 2), 2, prompts=2)]
    assert two_prompts == [(0, 0, 1), (0, 0, 2), (0, 1, 1), (0, 1, 2), (1, 0, 2), (1, 0, 1), (1, 1, 2), (1, 1, 1)]
    # A race keeps the drafter off first in every pair.
    kept = [(run, lane.key) for run, _, lane in schedule([off, on], 3, rotate=False)]
    assert kept == [(0, "off"), (0, "on"), (1, "off"), (1, "on"), (2, "off"), (2, "on")]


def test_block_lanes_turn_the_drafter_off_only_at_block_one():
    one, four = lanes(1, 4)
    assert one.options.speculative is False and one.tag == {"block": 1}
    assert four.options.speculative is True and four.options.draft_block_size == 4


def test_spread_and_divergence():
    assert spread([3.0, None, 1.0, 2.0]) == {"median": 2.0, "min": 1.0, "max": 3.0}
    assert spread([None]) is None
    assert divergence("same", "same") is None
    assert divergence("The cat sat", "The car sat") == (6, "t sat", "r sat")
    assert divergence("short", "shorter") == (5, "", "er")


def result(lane, run, tok_s, answer="a", **stats) -> LaneRun:
    return LaneRun(lane, run, 0, answer=answer, finish_reason="stop", stats={"tok_s": tok_s, **stats})


def test_tally_pairs_each_run_with_the_baseline_of_the_same_run():
    base, fast = lanes(1, 3)
    results = [
        result(base, 0, 100.0), result(fast, 0, 150.0, drafted=10, accepted=8, rounds=5),
        result(fast, 1, 300.0, drafted=10, accepted=6, rounds=5), result(base, 1, 200.0),
        result(base, 2, 100.0), result(fast, 2, 120.0, answer="b", drafted=10, accepted=6, rounds=5),
        LaneRun(fast, 3, 0, finish_reason="cancelled", stats={"tok_s": 999.0}),
    ]
    t = tally(results, fast, base)
    # Per-run ratios 1.5, 1.5, 1.2: not the ratio of the medians (200 / 100).
    assert t.speedup == {"median": 1.5, "min": 1.2, "max": 1.5}
    assert t.tok_s == {"median": 150.0, "min": 120.0, "max": 300.0} and t.runs == 3
    assert t.acceptance == round(20 / 30, 4) and t.mean_accepted == round(20 / 15, 3)
    assert t.identical is False and t.divergence == (0, "a", "b")
    assert tally(results, base, base).row()["speedup"] == 1.0


def test_rounds_from_a_servers_depth_totals():
    # 10 rounds: 7 kept a first draft, 4 of those a second, 1 all three.
    assert rounds_from_depths(10, [7, 4, 1]) == {"rounds": 10, "mean_accepted": 1.2, "accepted_hist": [3, 3, 3, 1]}
    assert rounds_from_depths(0, [])["rounds"] is None
    assert rounds_from_depths(5, [6])["accepted_hist"] is None  # more kept than rounds: not trusted


def play(options: GenerationOptions) -> tuple[list, Done]:
    engine = FakeEngine(delay_s=0.001)
    engine.load(options)
    events = list(guarded(engine.stream(Turn("t", "c", [Message("user", "hi")], options))))
    return [e for e in events if isinstance(e, (Thinking, Answer))], events[-1]


def test_fake_engine_drafts_in_verify_rounds_and_says_which_text_was_drafted():
    deltas, done = play(OPTIONS.updated({"draft_block_size": 3}))
    rounds = [r for d in deltas for r in d.rounds]
    stats = done.stats
    assert stats["rounds"] == len(rounds) and sum(stats["accepted_hist"]) == len(rounds)
    assert stats["accepted"] == sum(rounds) and stats["drafted"] == 2 * len(rounds)
    assert max(rounds) == 2 and stats["mean_accepted"] == round(sum(rounds) / len(rounds), 3)
    # Each kept draft is one whole token (word) of the fake's script.
    drafted = [d for d in deltas if d.draft_spans]
    assert len(drafted) == sum(rounds) and all(d.draft_spans == ((0, len(d.text)),) for d in drafted)
    assert "".join(d.text for d in deltas).split() == (THINKING + ANSWER).split()
    plain, done_plain = play(OPTIONS.updated({"speculative": False}))
    assert not any(d.rounds or d.draft_spans for d in plain)
    assert done_plain.stats["rounds"] is None and done_plain.stats["drafted"] is None


def test_acceptance_by_depth_pools_every_run_by_its_rounds():
    base, fast = lanes(1, 3)
    results = [
        result(base, 0, 100.0), result(base, 1, 100.0),
        LaneRun(fast, 0, 0, finish_reason="stop", stats={"tok_s": 150.0, "rounds": 30,
                                                          "acceptance_by_depth": [0.9, 0.6]}),
        LaneRun(fast, 1, 0, finish_reason="stop", stats={"tok_s": 150.0, "rounds": 10,
                                                          "acceptance_by_depth": [0.5, 0.2]}),
    ]
    # 30 rounds at 0.9 and 10 at 0.5 pool to 0.8; not the last run's 0.5, nor the plain mean 0.7.
    assert tally(results, fast, base).acceptance_by_depth == [0.8, 0.5]
    assert pooled_depths([(None, 5), ([0.5], 0)]) is None
    assert pooled_depths([([1.0, None], 4), ([0.5, 0.25], 4)]) == [0.75, 0.25]
    assert pooled_depths([([0.5], None), ([1.0], None)]) == [0.75]  # rounds not counted: runs weigh the same


def test_a_calibration_cancelled_before_its_first_token_ends_and_frees_the_engine():
    from webapp.measurement.baseline import calibrate
    from engines.cancel import Relay

    engine = FakeEngine(delay_s=0.001)
    engine.load(OPTIONS)
    cancel = Relay()
    cancel.set()  # a message came between the calibration's start and its first token
    run = calibrate(engine, OPTIONS, cancel)
    assert run.finish_reason == "cancelled" and not run.error
    # The engine takes the next reply at once: the calibration's stream was ended, not left open.
    events = list(guarded(engine.stream(Turn("t2", "c2", [Message("user", "hi")], OPTIONS))))
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "stop"
