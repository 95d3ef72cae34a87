"""specchat's own draft/verify loop: identical greedy output, exact rollback, exact sampling, prompt stops."""

import math
import threading

import pytest

from demo_model import DEFAULT_MODEL as DEMO
from engines import Answer, Done, GenerationOptions, Message, Thinking, Turn, guarded
from engines.mlx.decoding import Decoder, Sampling
from engines.mlx.loading import load_drafter, load_model

pytestmark = pytest.mark.slow

BLOCKS = (2, 3, 4, 5, 6)


@pytest.fixture(scope="module")
def tiny(tiny_model):
    loaded = load_model(str(tiny_model))
    load_drafter(loaded, None)
    return loaded


@pytest.fixture(scope="module")
def demo():
    loaded = load_model(str(DEMO))
    load_drafter(loaded, None)
    return loaded


def _prompt(loaded, text="What is 347 + 589?", thinking=True):
    from engines.mlx.prompts import PromptBuilder

    return PromptBuilder(loaded).conversation_ids("You are a helpful assistant.", [Message("user", text)], thinking)


def _generate(decoder, ids, block, max_tokens=96, stop_ids=frozenset(), state=None):
    state = state or decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    tokens, rounds = [], []
    for step in decoder.decode(state, first, max_tokens=max_tokens, block=block, sampling=Sampling(),
                               stop_ids=set(stop_ids), cancelled=lambda: False):
        tokens += step.tokens
        if step.accepted is not None:
            rounds.append(step.accepted)
    return tokens, rounds, state


@pytest.mark.parametrize("which", ["tiny", "demo"])
def test_greedy_output_identical_at_every_block(which, request):
    loaded = request.getfixturevalue(which)
    decoder = Decoder(loaded.model, loaded.drafter)
    ids = _prompt(loaded)
    plain, rounds, _ = _generate(decoder, ids, 1)
    assert rounds == [] and len(plain) == 96
    for block in BLOCKS:
        tokens, rounds, _ = _generate(decoder, ids, block)
        assert tokens == plain, f"block {block} diverged at {next(i for i, (a, b) in enumerate(zip(tokens, plain)) if a != b)}"
        assert rounds and max(rounds) <= block - 1


def test_own_loop_matches_mlx_vlm_greedy(demo):
    import mlx.core as mx
    from mlx_vlm import stream_generate

    ids = _prompt(demo)
    theirs = [c.token for c in stream_generate(demo.model, demo.processor, "", input_ids=mx.array([ids]),
                                               max_tokens=64, temperature=0.0) if c.finish_reason is None]
    ours, _, _ = _generate(Decoder(demo.model, demo.drafter), ids, 4, max_tokens=64)
    assert ours[: len(theirs)] == theirs


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_rotation_equals_mlx_vlms_mrope_on_text_positions(demo, dtype):
    import mlx.core as mx

    from dataclasses import replace

    from engines.mlx.stepper import rotate

    attn = next(layer.mixer for layer in Decoder(demo.model).target.layers if not layer.is_linear)
    assert attn.rotary.periods is not None
    queries = mx.random.normal((1, 4, 5, attn.head_dim), key=mx.random.key(1)).astype(getattr(mx, dtype))
    keys = mx.random.normal((1, 2, 5, attn.head_dim), key=mx.random.key(2)).astype(getattr(mx, dtype))
    positions = (mx.arange(5, dtype=mx.int32) + 700)[None]
    ids = mx.broadcast_to(positions[None], (3, *positions.shape))
    fused = rotate(attn.rotary, queries, keys, positions, ids)
    theirs = rotate(replace(attn.rotary, periods=None), queries, keys, positions, ids)
    assert not mx.array_equal(fused[0], queries)  # it rotates
    for ours, reference in zip(fused, theirs):
        assert mx.allclose(ours.astype(mx.float32), reference.astype(mx.float32), atol=1e-5).item()


def test_demo_model_drafts_pay_off_in_acceptance(demo):
    """The bundled head drafts the body's tokens: most rounds keep every draft."""
    _, rounds, _ = _generate(Decoder(demo.model, demo.drafter), _prompt(demo), 4, max_tokens=80)
    assert sum(rounds) / (3 * len(rounds)) > 0.7


def test_rollback_after_partial_acceptance_equals_a_fresh_prefill(tiny):
    """Reject the drafts after the first: the recurrent and attention state must be the accepted tokens' own."""
    import mlx.core as mx

    decoder = Decoder(tiny.model, None)
    target = decoder.target
    ids = _prompt(tiny, thinking=False)
    state = decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    mx.eval(first)
    good = target.verify(state.target.snapshot(), first)
    nxt = int(good.tokens[0, 0].item())
    # A block of the pending token, one right draft and two wrong ones; keep two positions.
    block = mx.array([[int(first.item()), nxt, 7, 9]], dtype=mx.int32)
    verified = target.verify(state.target, block)
    target.commit(state.target, verified, 2)
    fresh = decoder.new_state()
    decoder.feed(fresh, ids + [int(first.item()), nxt], 0, Sampling())
    assert state.target.offset == fresh.target.offset == len(ids) + 2
    for layer, (a, b), (fa, fb) in zip(target.layers, state.target.layers, fresh.target.layers):
        if layer.is_linear:
            assert mx.allclose(a, fa, atol=1e-5).item() and mx.allclose(b, fb, atol=1e-4).item()
        else:
            n = fresh.target.offset
            assert mx.allclose(a[:, :, :n], fa[:, :, :n], atol=1e-5).item()
    probe = mx.array([[11]], dtype=mx.int32)
    after_rollback = target.verify(state.target, probe, greedy=False).logits
    after_fresh = target.verify(fresh.target, probe, greedy=False).logits
    assert mx.allclose(after_rollback, after_fresh, atol=1e-4).item()


def _chi_square_z(counts: dict[int, int], probs: dict[int, float], n: int) -> float:
    """Pearson's statistic against ``probs`` as a z-score (categories under 5 expected are pooled)."""
    pooled_obs = pooled_exp = 0.0
    stat, df = 0.0, -1
    for token, p in probs.items():
        expected = p * n
        if expected < 5:
            pooled_obs += counts.get(token, 0)
            pooled_exp += expected
            continue
        stat += (counts.get(token, 0) - expected) ** 2 / expected
        df += 1
    pooled_obs += sum(c for t, c in counts.items() if t not in probs)
    pooled_exp += n - sum(probs.values()) * n
    if pooled_exp >= 5:
        stat += (pooled_obs - pooled_exp) ** 2 / pooled_exp
        df += 1
    return (stat - df) / math.sqrt(2 * df)


def test_speculative_sampling_follows_the_target_distribution(tiny):
    """The token after a round's first position is drawn from the target's own distribution."""
    import mlx.core as mx

    from engines.mlx.decoding import probabilities, sample

    sampling = Sampling(temperature=0.7, top_p=0.9)
    decoder = Decoder(tiny.model, tiny.drafter)
    ids = _prompt(tiny, thinking=False)
    start = decoder.new_state()
    first = decoder.feed(start, ids, 0, sampling)
    fixed = mx.array([[int(first.item())]], dtype=mx.int32)
    fresh = decoder.new_state()  # the target's own distribution after ``fixed``
    hidden = decoder.target.prefill(fresh.target, ids + [int(fixed.item())], 0)
    target = probabilities(decoder.target.head(hidden[:, -1:]), sampling)[0, 0]
    probs = {i: p for i, p in enumerate(target.tolist()) if p > 0}
    mx.random.seed(1)
    n, counts = 1500, {}
    for _ in range(n):
        state = start.snapshot()
        state.drafter.seed_token = sample(state.drafter.seed_probs)  # each round draws its own first draft
        steps = decoder.decode(state, fixed, max_tokens=2, block=3, sampling=sampling, stop_ids=set(),
                               cancelled=lambda: False)
        next(steps)
        token = next(steps).tokens[0]
        counts[token] = counts.get(token, 0) + 1
    assert set(counts) <= set(probs), "sampled a token the target gives no mass"
    assert abs(_chi_square_z(counts, probs, n)) < 4.5


def _drain(engine, turn, cancel_after=None):
    """The reply's text and its Done; Stop after ``cancel_after`` deltas when given."""
    parts, done = [], None
    for event in guarded(engine.stream(turn)):
        if isinstance(event, (Thinking, Answer)):
            parts.append(event.text)
            if cancel_after is not None and len(parts) == cancel_after:
                turn.cancel.set()
        elif isinstance(event, Done):
            done = event
    return "".join(parts), done


def _engine_reply(engine, text, options, conversation="c", cancel_after=None):
    turn = Turn(id="t", conversation_id=conversation, messages=[Message("user", text)], options=options)
    return _drain(engine, turn, cancel_after)


@pytest.fixture(scope="module")
def engine():
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(DEMO))
    engine.load(GenerationOptions())
    yield engine
    engine.unload()


def test_engine_identical_across_budget_cut_and_next_turn(engine):
    """Through the engine: a thinking budget cut mid-thought and a next turn on the cache, at every block."""
    results = {}
    for block in (1, *BLOCKS):
        options = GenerationOptions(reasoning_budget=12, max_tokens=48, speculative=block > 1,
                                    draft_block_size=max(block, 2), temperature=0.0)
        conversation = f"budget-{block}"
        first, done = _engine_reply(engine, "What is 347 + 589?", options, conversation)
        assert done.finish_reason in ("stop", "length") and done.stats["thinking_tokens"] == 12
        assert done.stats["budget_bound"] == "cut"
        next_turn = Turn(id="t2", conversation_id=conversation,
                         messages=[Message("user", "What is 347 + 589?"), Message("assistant", first),
                                   Message("user", "What is 12 + 30?")], options=options)
        second, done2 = _drain(engine, next_turn)
        assert done2.stats["cached_tokens"] > 0, "the next turn did not reuse the conversation's cache"
        results[block] = (first, second)
        if block > 1:
            assert done.stats["rounds"] > 0 and done.stats["accepted_hist"] is not None
    for block in BLOCKS:
        assert results[block] == results[1], f"block {block} differs"


@pytest.mark.parametrize("max_tokens, finish", [(40, "stop"), (7, "length")])
def test_mlx_vlm_loop_still_selectable_and_identical(engine, max_tokens, finish):
    options = GenerationOptions(reasoning_budget=0, max_tokens=max_tokens, temperature=0.0)
    ours, mine = _engine_reply(engine, "What is 12 + 30?", options, f"own-{max_tokens}")
    theirs, done = _engine_reply(engine, "What is 12 + 30?", options.updated({"decode_loop": "mlx-vlm"}),
                                 f"vlm-{max_tokens}")
    assert done.finish_reason == mine.finish_reason == finish and ours == theirs
    assert done.stats["answer_tokens"] == mine.stats["answer_tokens"]


def test_stop_takes_effect_within_one_round(engine):
    options = GenerationOptions(reasoning_budget=400, max_tokens=400, draft_block_size=6, temperature=0.0)
    text, done = _engine_reply(engine, "Count the letters in strawberry", options, "stop", cancel_after=1)
    assert done.finish_reason == "cancelled"
    # One delta seen, then at most the round in flight (6 tokens) and a delta batch's worth of its text.
    assert done.stats["tokens"] <= 1 + 6 + 6


def test_stop_during_prefill_ends_the_reply(engine):
    options = GenerationOptions(reasoning_budget=0, max_tokens=8, prefill_step_size=16)
    turn = Turn(id="p", conversation_id="prefill", messages=[Message("user", "word " * 3000)], options=options)
    timer = threading.Timer(0.05, turn.cancel.set)
    timer.start()
    events = list(guarded(engine.stream(turn)))
    timer.cancel()
    assert isinstance(events[-1], Done) and events[-1].finish_reason == "cancelled"
    assert not any(isinstance(e, (Thinking, Answer)) for e in events)


@pytest.mark.parametrize("loop", ["specchat", "mlx-vlm"])
def test_rounds_are_counted_once_across_a_budget_cut(engine, loop):
    """Each round yields its accepted drafts plus one token: the counts must add up over both phases."""
    options = GenerationOptions(reasoning_budget=10, max_tokens=40, draft_block_size=4, temperature=0.0,
                                decode_loop=loop)
    _, done = _engine_reply(engine, "What is 347 + 589?", options, f"count-{loop}")
    stats = done.stats
    assert stats["thinking_tokens"] == 10 and stats["rounds"] > 2
    produced = stats["rounds"] + stats["accepted"]  # tokens the rounds yielded, before any cut at a limit
    # Each phase's first token comes from the prompt, not a round; a limit may cut a round's last tokens.
    assert stats["tokens"] - 2 <= produced <= stats["tokens"] - 2 + 2 * 3
    assert sum(stats["accepted_hist"]) == stats["rounds"]


@pytest.mark.parametrize("loop", ["specchat", "mlx-vlm"])
def test_max_tokens_bounds_the_answer_when_the_model_closes_its_own_thinking(engine, loop):
    """A budget far above what the model thinks: the answer starts inside the first phase."""
    options = GenerationOptions(reasoning_budget=4000, max_tokens=5, temperature=0.0, decode_loop=loop)
    _, done = _engine_reply(engine, "What is 347 + 589?", options, f"cap-{loop}")
    assert done.finish_reason == "length"
    assert 0 < done.stats["thinking_tokens"] < 4000 and done.stats["answer_tokens"] == 5
    assert done.stats["budget_bound"] == "none"  # the model closed its thinking before the budget


def test_a_prompt_past_the_context_is_refused_before_any_work(engine):
    limit = engine._loaded.config["text_config"]["max_position_embeddings"]
    options = GenerationOptions(reasoning_budget=0, max_tokens=4, prefill_step_size=4096)
    text, done = _engine_reply(engine, "7 " * limit, options, "too-long")
    assert done.finish_reason == "error" and done.error_code == "context_length" and text == ""
    assert str(limit) in done.error_message and "tokens" in done.error_message


def _continue_reply(engine, messages, options, conversation):
    return _drain(engine, Turn(id="c", conversation_id=conversation, messages=messages, options=options,
                               continued=True))


@pytest.mark.parametrize("loop", ["specchat", "mlx-vlm"])
def test_a_reply_cut_at_its_length_goes_on_where_it_stopped(engine, loop):
    options = GenerationOptions(reasoning_budget=0, max_tokens=30, temperature=0.0, decode_loop=loop)
    question = "How many letters are in strawberry?"
    whole, _ = _engine_reply(engine, question, options, f"whole-{loop}")
    cut, done = _engine_reply(engine, question, options.updated({"max_tokens": 8}), f"cut-{loop}")
    assert done.finish_reason == "length" and whole.startswith(cut)
    messages = [Message("user", question), Message("assistant", cut)]
    more, done = _continue_reply(engine, messages, options.updated({"max_tokens": 22}), f"cut-{loop}")
    assert done.finish_reason in ("stop", "length") and done.stats["answer_tokens"] > 0
    assert cut + more == whole  # on the conversation's cache: the reply's own tokens, nothing re-encoded
    fresh, done = _continue_reply(engine, messages, options.updated({"max_tokens": 22}), f"fresh-{loop}")
    assert done.finish_reason in ("stop", "length") and fresh  # rebuilt from the text after a restart


LONG_PROMPT = [i % 500 + 10 for i in range(1300)]


@pytest.fixture(scope="module")
def long_prompt_hidden(demo):
    """mlx-vlm's model's own hidden states for LONG_PROMPT, in one pass: what every chunking must give."""
    import mlx.core as mx

    lm = demo.model.language_model
    return lm.model(mx.array([LONG_PROMPT]), cache=lm.make_cache())


@pytest.mark.parametrize("chunk", [0, 600, 1000])
def test_prefill_returns_the_models_own_hidden_states_for_its_tail(demo, long_prompt_hidden, chunk):
    """Chunks of any size, one longer than the tail or not: the tail is what mlx-vlm's model computes."""
    import mlx.core as mx

    from engines.mlx.stepper import TAIL

    decoder = Decoder(demo.model, None)
    state = decoder.new_state()
    tail = decoder.target.prefill(state.target, LONG_PROMPT, chunk)
    assert tail.shape[1] == TAIL and state.target.offset == len(LONG_PROMPT)
    assert mx.allclose(tail, long_prompt_hidden[:, -TAIL:], atol=1e-4).item()


def test_a_failed_settings_change_on_the_model_thread_is_logged(engine, caplog, monkeypatch):
    """``prepare`` runs without the caller waiting: its failure must still reach the log."""
    def broken(options):
        raise RuntimeError("warm-up broke")

    monkeypatch.setattr(engine, "_prepare", broken)
    with caplog.at_level("ERROR", logger="engines.mlx.engine"):
        engine.prepare(GenerationOptions(system_prompt="Something new."))
        engine._thread.submit(lambda: None).result()  # the model thread has run the job before this
    assert any(r.getMessage().endswith("failed") and "warm-up broke" in str(r.exc_info[1])
               for r in caplog.records if r.exc_info)


def test_a_short_system_prompt_is_primed_too(engine):
    """specchat's loop snapshots the system prefix at any length (mlx-vlm's prefix cache stores
    whole 16-token blocks only)."""
    options = GenerationOptions(system_prompt="Be brief.", reasoning_budget=0, max_tokens=4, temperature=0.0)
    engine.prepare(options)
    engine._thread.submit(lambda: None).result()  # priming has run
    prefix = engine._prompts.system_prefix_ids("Be brief.")
    assert 0 < len(prefix) < 16
    turn = Turn(id="s", conversation_id="short-system", options=options,
                messages=[Message("user", "What is 12 + 30?")])
    _, done = _drain(engine, turn)
    assert done.stats["cached_tokens"] == len(prefix)


def test_a_burst_of_settings_changes_prepares_once_for_the_newest(engine, monkeypatch):
    import time

    prepared = []

    def slow(options):
        time.sleep(0.2)
        prepared.append(options.system_prompt)

    monkeypatch.setattr(engine, "_prepare", slow)
    for i in range(6):
        engine.prepare(GenerationOptions(system_prompt=f"Prompt {i}."))
    engine._thread.submit(lambda: None).result()  # every queued job has run
    assert prepared[-1] == "Prompt 5." and len(prepared) <= 2
