"""``draft_block_size: "auto"`` on specchat's own loop, on a rig that rejects drafts: the greedy text is the
drafter-off text through every change of block and every stretch of drafting off, and a reply's stats say
which blocks ran (``block_history``)."""

import pytest

from demo_model.rig import build_rig
from engines import Done, GenerationOptions, Message, Turn, guarded
from engines.block_policy import Memory

pytestmark = pytest.mark.slow

SMALL = {"hidden": 64, "layers": 4, "intermediate": 128, "vocab": 1024}
PROMPT = "<|im_start|>user\nhello, rig<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    return build_rig(tmp_path_factory.mktemp("rigs") / "rig-60", acceptance=0.6, **SMALL)


@pytest.fixture(scope="module")
def loaded(rig):
    from engines.mlx.loading import load_drafter, load_model

    loaded = load_model(str(rig))
    load_drafter(loaded, None)
    return loaded


class Scripted:
    """A policy that runs blocks from a fixed cycle, drafting off (1) included, so every switch happens."""

    CYCLE = (1, 1, 1, 3, 3, 5, 5, 1, 1, 2, 6, 6, 4, 1, 2, 2)

    def __init__(self):
        self.n = 0

    def block(self) -> int:
        return self.CYCLE[self.n % len(self.CYCLE)]

    def observe(self, block, accepted=None, seconds=None) -> None:
        self.n += 1


def generate(loaded, block, tokens: int = 300, sampling=None, stop: bool = True):
    """Greedy tokens at ``block`` (an int, or a policy) and the block of every step after the first; ``stop``:
    a reply ends at the model's stop tokens."""
    from engines.mlx.decoding import Sampling
    from engines.mlx.engine import own_decoder

    decoder, stop_ids, _, _ = own_decoder(loaded)
    ids = loaded.tokenizer.encode(PROMPT, add_special_tokens=False)
    state = decoder.new_state()
    sampling = sampling or Sampling()
    first = decoder.feed(state, ids, 0, sampling)
    out, steps = [], []
    for step in decoder.decode(state, first, max_tokens=tokens, block=block, sampling=sampling,
                               stop_ids=stop_ids if stop else set(), cancelled=lambda: False):
        out += step.tokens
        if step.block is not None:
            steps.append((step.block, step.accepted))
    return out, steps


def test_greedy_output_is_the_drafter_off_output_through_every_switch(loaded):
    reference, plain = generate(loaded, 1)
    assert {block for block, _ in plain} == {1}
    scripted, steps = generate(loaded, Scripted())
    assert scripted == reference
    assert {block for block, _ in steps} == set(Scripted.CYCLE)
    assert any(accepted is not None and accepted < block - 1 for block, accepted in steps)  # rejections happened
    policy = Memory().policy("rig")
    chosen, steps = generate(loaded, policy)
    assert chosen == reference and steps[0][0] == 1  # the real policy: plain steps are timed first


def test_sampled_replies_run_through_switches_to_the_length_asked(loaded):
    import mlx.core as mx

    from engines.mlx.decoding import Sampling

    mx.random.seed(3)
    tokens, steps = generate(loaded, Scripted(), tokens=120, sampling=Sampling(temperature=0.8), stop=False)
    assert len(tokens) == 120 and {block for block, _ in steps} == set(Scripted.CYCLE)


@pytest.fixture(scope="module")
def engine(rig):
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(rig))
    engine.load(GenerationOptions())
    yield engine
    engine.unload()


def reply(engine, options, conversation, messages=None):
    turn = Turn(id="t", conversation_id=conversation, options=options,
                messages=messages or [Message("user", "hello, rig")])
    text, done = "", None
    for event in guarded(engine.stream(turn)):
        if isinstance(event, Done):
            done = event
        elif hasattr(event, "text"):
            text += event.text
    return text, done.stats, done.finish_reason


def test_a_replys_stats_say_which_blocks_ran(engine):
    options = GenerationOptions(reasoning_budget=0, max_tokens=120, temperature=0.0)
    assert options.draft_block_size == "auto"
    text, stats, _ = reply(engine, options, "auto")
    history = stats["block_history"]
    assert history and all(key.isdigit() and count > 0 for key, count in history.items())
    # One step per entry: the rounds at blocks above 1 are the verify rounds, and every token but the
    # first (the prompt's) came from a step.
    assert sum(n for key, n in history.items() if key != "1") == stats["rounds"]
    steps = sum(history.values())
    # A step yields its kept drafts + 1 (the reply's stop token, when it ends on one, is not counted as a token).
    assert steps <= stats["tokens"] <= 1 + steps + stats["accepted"]
    assert str(stats["auto_block"]) in history
    off_text, off, off_finish = reply(engine, options.updated({"speculative": False}), "off")
    assert off_text == text and off["auto_block"] is None
    # Every token but the first a plain step, and a stop token's step besides.
    assert off["block_history"] == {"1": off["tokens"] - 1 + (off_finish == "stop")}
    _, fixed, _ = reply(engine, options.updated({"draft_block_size": 3}), "fixed")
    assert fixed["block_history"] == {"3": fixed["rounds"]} and fixed["auto_block"] is None


def test_the_engine_compiles_every_block_auto_may_pick_in_the_background(rig):
    """After its warm-up (block 4 for auto) the engine compiles the other blocks one job at a time, off the reply
    path, and auto picks among those compiled (engines/block_policy.py)."""
    import time

    from engines.block_policy import BLOCKS, START_BLOCK
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(rig))
    engine.load(GenerationOptions())
    try:
        ready = engine._auto.ready
        assert ready is not None and START_BLOCK in ready
        deadline = time.monotonic() + 60
        while set(BLOCKS) - ready and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready == set(BLOCKS)
        engine.unload()
        assert engine._auto.ready is None
        engine.load(GenerationOptions(draft_block_size=2))  # a fixed block: nothing compiled for auto
        assert engine._auto.ready is None
    finally:
        engine.unload()


def test_the_next_turn_on_auto_is_the_drafter_off_turn(engine):
    """After a reply on auto (drafting off and on), the conversation's caches serve the next turn exactly."""
    texts = {}
    for name, values in (("off", {"speculative": False}), ("auto", {})):
        options = GenerationOptions(reasoning_budget=0, max_tokens=80, temperature=0.0).updated(values)
        first, _, _ = reply(engine, options, f"next-{name}")
        messages = [Message("user", "hello, rig"), Message("assistant", first), Message("user", "and again")]
        second, stats, _ = reply(engine, options, f"next-{name}", messages)
        assert stats["cached_tokens"] > 0
        texts[name] = (first, second)
    assert texts["auto"] == texts["off"]
