from engines.stats import StatsMeter, acceptance_by_depth


def test_acceptance_by_depth_counts_kept_prefixes():
    # Three rounds of three drafts: all kept, first two kept, none kept.
    assert acceptance_by_depth([(3, 3), (2, 3), (0, 3)]) == [0.6667, 0.6667, 0.3333]
    # A shorter round (near max_tokens) drafts fewer and only counts where it drafted.
    assert acceptance_by_depth([(1, 1), (0, 2)]) == [0.5, 0.0]
    assert acceptance_by_depth([]) == []


def test_snapshot_without_drafter_has_null_draft_fields():
    meter = StatsMeter()
    meter.token(thinking=True)
    meter.token(thinking=False)
    stats = meter.snapshot()
    assert stats["drafted"] is None and stats["acceptance"] is None and stats["acceptance_by_depth"] is None
    assert (stats["thinking_tokens"], stats["answer_tokens"], stats["tokens"]) == (1, 1, 2)


def test_block_history_counts_rounds_per_block_keyed_as_text():
    meter = StatsMeter()
    assert meter.snapshot()["block_history"] is None  # nothing counted: a daemon's reply
    for block in (1, 1, 4, 4, 4, 2):
        meter.ran_block(block, auto=True)
    snap = meter.snapshot()
    assert snap["block_history"] == {"1": 2, "2": 1, "4": 3} and list(snap["block_history"]) == ["1", "2", "4"]
    assert snap["auto_block"] == 2
    rounds_only = StatsMeter()  # mlx-vlm's loop: every step a verify round, counted at drafted + 1
    rounds_only.record_rounds([(3, 3), (0, 3), (1, 1)])
    assert rounds_only.snapshot()["block_history"] == {"2": 1, "4": 2}
    assert rounds_only.snapshot()["auto_block"] is None
