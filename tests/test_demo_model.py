"""The shipped demo checkpoint: loads like a real Qwen 3.5 MLX model, talks, thinks, and drafts."""

import json
import re
import subprocess
import sys

import pytest

from demo_model import DEFAULT_MODEL as CHECKPOINT
from engines.mlx.loading import has_bundled_mtp
from training import corpus
from training.evaluate import answer_number, messages

FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]


def test_shipped_files_are_a_complete_small_qwen3_5_checkpoint():
    assert all((CHECKPOINT / name).is_file() for name in FILES)
    assert sum(f.stat().st_size for f in CHECKPOINT.iterdir()) <= 30_000_000
    config = json.loads((CHECKPOINT / "config.json").read_text())
    assert config["model_type"] == "qwen3_5"
    assert config["text_config"]["mtp_num_hidden_layers"] == 1
    assert has_bundled_mtp(CHECKPOINT)


def test_load_drafter_picks_up_the_bundled_mtp_head(demo_runner):
    assert demo_runner.kind == "mtp"
    assert type(demo_runner.drafter).__name__ == "Qwen3_5MTPDraftModel"


def test_tokenizer_splits_digits_and_matches_the_raw_tokenizer(demo_runner):
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(CHECKPOINT / "tokenizer.json"))
    text = "<|im_start|>user\nWhat is 347 + 285?<|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert list(demo_runner.tokenizer.encode(text, add_special_tokens=False)) == raw.encode(text).ids
    digits = [t for t in raw.encode("347").tokens]
    assert digits == ["3", "4", "7"]


def test_chat_template_opens_thinking_or_writes_the_empty_block(demo_runner):
    on = demo_runner.tokenizer.decode(demo_runner.prompt_ids(messages("Hi"), True))
    off = demo_runner.tokenizer.decode(demo_runner.prompt_ids(messages("Hi"), False))
    assert on.endswith("<|im_start|>assistant\n<think>\n")
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.mark.slow
def test_greeting_thinks_then_answers_and_streams_word_by_word(demo_runner):
    import mlx.core as mx
    from mlx_vlm import stream_generate

    ids = demo_runner.prompt_ids(messages("Hello!"), True)
    pieces = [
        c.text
        for c in stream_generate(demo_runner.model, demo_runner.processor, "", input_ids=mx.array([ids]), max_tokens=60,
                                 temperature=0.0)
    ]
    text = "".join(pieces)
    assert text.endswith("</think>\n\nHello! How can I help you today?")
    assert sum(1 for p in pieces if p.strip()) >= 15  # released piece by piece, not at the end


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1, 2])
def test_held_out_arithmetic_is_answered_right(demo_runner, index):
    exchange, expected = corpus.held_out_arithmetic(3)[index]
    reply = demo_runner.generate(demo_runner.prompt_ids(messages(exchange.user), True), None)
    assert "</think>" in reply.text
    assert answer_number(reply.text) == expected


@pytest.mark.slow
def test_thinking_off_answers_without_reasoning(demo_runner):
    reply = demo_runner.generate(demo_runner.prompt_ids(messages("How do I reset the cache?"), False), None)
    assert "think>" not in reply.text
    assert "Reset cache button" in reply.text
    assert "The user asks" not in reply.text


@pytest.mark.slow
def test_out_of_domain_gets_the_polite_fallback(demo_runner):
    reply = demo_runner.generate(demo_runner.prompt_ids(messages("Write a poem about the sea."), False), None)
    assert reply.text.strip() == corpus.FALLBACK


@pytest.mark.slow
def test_greedy_output_is_identical_with_the_mtp_drafter(demo_runner):
    ids = demo_runner.prompt_ids(messages("What is 478 - 193?"), True)
    plain = demo_runner.generate(ids, None)
    snapshot = demo_runner.stats()
    drafted = demo_runner.generate(ids, 3)
    accepted, total = demo_runner.since(snapshot)
    assert drafted.tokens == plain.tokens
    assert total > 0 and accepted / total > 0.5


@pytest.mark.slow
def test_the_evaluations_answers_are_mlx_vlms_plain_replies(demo_runner):
    """Runner.answer (specchat's own loop, drafting) gives what mlx-vlm's plain generation gives, text and tokens:
    the skills, room, chats and tools the evaluation and tests judge are the plain replies."""
    for question, thinking in (("What is 478 - 193?", True), ("How do I reset the cache?", False),
                               ("How many r's are in strawberry?", True)):
        ids = demo_runner.first_turn_ids(question, thinking)
        plain, answered = demo_runner.generate(ids, None), demo_runner.answer(ids)
        assert len(plain.tokens) > 5
        assert (answered.text, answered.tokens) == (plain.text, plain.tokens), question


def test_corpus_is_deterministic_and_keeps_held_out_questions_out():
    import random

    assert corpus.samples(5, 50) == corpus.samples(5, 50)
    # An answer such as "347 + 285 = 632." names the problem whatever the question's wording.
    held_out = {ex.answer for ex, _ in corpus.held_out_arithmetic(200)}
    rng = random.Random(0)
    trained = {corpus.add_sub(rng).answer for _ in range(50_000)}
    assert len(held_out) == 200 and not held_out & trained


def test_sums_draw_a_number_with_its_own_first_or_last_digits_either_way_round():
    import random

    rng = random.Random(6)
    drawn = [corpus.overlapping_operands(rng) for _ in range(2000)]
    for a, b in drawn:
        short, long = sorted((str(a), str(b)), key=len)
        assert len(short) < len(long) and (long.endswith(short) or long.startswith(short)), (a, b)
    assert 2000 * 0.4 < sum(len(str(a)) < len(str(b)) for a, b in drawn) < 2000 * 0.6
    assert 2000 * 0.5 < sum(max(str(a), str(b), key=len).endswith(min(str(a), str(b), key=len)) for a, b in drawn)
    rng = random.Random(0)
    users = [corpus.add_sub(rng).user for _ in range(5000)]
    pairs = [tuple(re.findall(r"\d+", u)) for u in users]
    overlapping = [p for p in pairs if len(p) == 2 and len(p[0]) != len(p[1])
                   and any(x.endswith(y) or x.startswith(y) for x, y in (p, p[::-1]))]
    assert 5000 * 0.06 < len(overlapping) < 5000 * 0.2  # 8% drawn so, a few more by chance


def test_sums_and_products_are_asked_what_they_equal_but_never_in_the_held_out_wording():
    import random

    rng = random.Random(3)
    asked = [corpus.add_sub(rng).user for _ in range(4000)] + [corpus.multiply(rng).user for _ in range(2000)]
    equal = [q for q in asked if re.search(r"\bequal\b", q)]
    # Three or four wordings in about forty per operation: 7-9% expected.
    assert 6000 * 0.04 < len(equal) < 6000 * 0.14
    assert all(any(f" {word} " in q for q in equal) for word in ("times", "plus", "minus"))
    assert not [q for q in asked if re.search(r"\bequals\?", q)]
    remains = [q for q in asked if q.startswith("How much remains once you take")]
    assert remains and all(re.fullmatch(r"How much remains once you take \d+ away from \d+\?", q) for q in remains)
    # Three wordings of about fifty, in the draws that subtract: about a hundred of these 4,000.
    taken = [q for q in asked if re.search(r"\btake \d+ from \d+", q)]
    assert len(taken) > 4000 * 0.5 / 50 and not [q for q in asked if q.startswith("How much is left when")]


def test_word_start_words_keep_their_first_token_and_the_probe_draws_each_set_as_named():
    import random

    from training import probe_words

    tokenizer = probe_words.demo_tokenizer()
    starts = corpus.word_start_pieces()
    assert {"me", "go", "un", "an"} <= set(starts) and all(2 <= len(s) <= 3 and s.islower() for s in starts)
    rng = random.Random(3)
    drawn = [corpus.pieces_word(rng, "me") for _ in range(200)]
    assert all(w.startswith("me") and len(w) > 2 for w in drawn)
    assert sum(probe_words.first_token(tokenizer, w) == "Ġme" for w in drawn) > 100  # most keep " me" once encoded
    clause_starts = corpus.clause_word_starts()
    assert {"in", "is", "it", "of", "do", "me"} <= set(clause_starts) < set(starts) and "go" not in clause_starts
    counted = [corpus.any_word(rng) for _ in range(5000)]
    assert sum(probe_words.first_token(tokenizer, w)[1:] in clause_starts for w in counted) > 5000 * 0.08

    probe = probe_words.words(random.Random(5), 30, probe=True)
    control = probe_words.words(random.Random(5), 30, probe=False)
    held_out = set(corpus.HELD_OUT_WORDS)
    for word in probe + control:
        assert probe_words.MIN_LETTERS <= len(word) <= probe_words.MAX_LETTERS and word not in held_out
    assert all(probe_words.first_token(tokenizer, w)[1:] in probe_words.WORD_STARTS for w in probe)
    assert all(len(probe_words.first_token(tokenizer, w)) == 3 for w in control)
    assert not any(probe_words.first_token(tokenizer, w)[1:] in probe_words.WORD_STARTS for w in control)
    assert probe_words.tally([2, 3, 2, 4], [True, False, False, True]) == "2 1/2, 3 0/1, 4 1/1"


def test_tempting_words_glue_a_word_of_the_questions_or_units_whole_or_cut_to_other_letters():
    import random

    pieces = set(corpus.tempting_pieces())
    assert {"would", "say", "much", "only", "helpful", "one", "kilogram", "centimeter"} <= pieces
    assert not pieces & set(corpus.HELD_OUT_WORDS) and all(len(p) >= 3 and p.isalpha() for p in pieces)
    rng = random.Random(4)
    drawn = [corpus.tempting_word(rng) for _ in range(3000)]
    assert all(w.isalpha() and w.islower() and 3 <= len(w) <= corpus.MAX_WORD_LETTERS for w in drawn)
    glued_whole = [w for w in drawn if any(p in w and p != w for p in pieces if len(p) >= 5)]
    assert 3000 * 0.3 < len(glued_whole) < 3000 * 0.7  # the rest hold a cut of one ("kilog", "centime")
    assert sum(w in pieces for w in drawn) < 3000 * 0.01  # a known word alone is rare, and only by chance


def test_the_letter_probe_asks_every_letter_in_every_held_out_wording_of_words_that_have_it():
    import random

    from training import evaluate, probe_letters

    asked = probe_letters.questions(random.Random(7), 2)
    assert len(asked) == 26 * len(evaluate.HELD_OUT_LETTERS) * 2
    assert {letter for letter, _, _ in asked} == set("abcdefghijklmnopqrstuvwxyz")
    assert {wording for _, wording, _ in asked} == set(evaluate.HELD_OUT_LETTERS)
    tempting = probe_letters.questions(random.Random(7), 2, corpus.tempting_word)
    assert len(tempting) == len(asked) and [ex.user for *_, ex in tempting] != [ex.user for *_, ex in asked]
    held_out = set(corpus.HELD_OUT_WORDS)
    for letter, wording, ex in asked + tempting:
        word = ex.reasoning.split(" in ", 1)[1].split(":", 1)[0]
        assert letter in word and word not in held_out and ex.user == wording.format(w=word, c=letter)
        count = word.count(letter)
        assert ex.answer.startswith(f"There are {count} {letter}'s" if count > 1 else f"There is 1 {letter} in")


@pytest.mark.slow
def test_evaluate_asks_one_question_in_both_modes_and_prints_the_whole_reply():
    out = subprocess.run([sys.executable, "-m", "training.evaluate", str(CHECKPOINT), "--ask", "What is 12 + 30?"],
                         cwd=CHECKPOINT.parent.parent, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    on, off = out.stdout.split("--- What is 12 + 30? (thinking on)\n")[1].split("--- What is 12 + 30? (thinking off)\n")
    assert "Ones: 2 + 0 + 0 = 2" in on and on.rstrip().endswith("</think>\n\n12 + 30 = 42.")
    assert off.strip() == corpus.THINK_FOR_SUMS
    assert "skills on held-out wordings" not in out.stdout  # asking measures nothing


def test_export_writes_the_same_checkpoint_from_its_weights_and_checks_keys(tmp_path):
    from safetensors.numpy import load_file

    from training.export import write_checkpoint

    shipped = load_file(str(CHECKPOINT / "model.safetensors"))
    trained = {k: v for k, v in shipped.items() if not k.startswith("vision_tower.")}
    out = write_checkpoint(trained, CHECKPOINT, tmp_path / "again")
    assert (out / "model.safetensors").read_bytes() == (CHECKPOINT / "model.safetensors").read_bytes()
    assert all((out / name).read_bytes() == (CHECKPOINT / name).read_bytes() for name in FILES[2:])
    del trained["mtp.fc.weight"]
    with pytest.raises(ValueError, match="mtp.fc.weight"):
        write_checkpoint(trained, CHECKPOINT, tmp_path / "broken")


def test_training_batches_keep_to_the_token_budget_and_mask_only_replies():
    import numpy as np

    from training.train import batches, encode_chunk

    ids, lengths, masks = encode_chunk((str(CHECKPOINT / "tokenizer.json"), 3, 300, False))
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    stream = batches((ids, starts, lengths, masks), 4096, 0)
    rows = 0
    for _ in range(10):
        x, mask = next(stream)
        assert x.size <= 4096 or len(x) == 1
        for row, row_mask in zip(x, mask):
            n = int((row != 0).sum())  # right-padded with <|endoftext|> (id 0), which replies never hold
            trained = row[row_mask == 1]
            assert trained[-1] == 2 and len(trained) < n  # each reply ends with <|im_end|>, after its prompt
        rows += len(x)
    assert rows > 10


def test_training_chats_are_the_ids_specchat_sends_with_every_reply_trained(demo_runner):
    """A chat as the corpus trains on it is, token for token, what specchat's prompt builder makes of it."""
    import random

    from tokenizers import Tokenizer

    from training.train import encode_pieces

    rng = random.Random(3)
    turns = corpus.conversation(rng, 4, augment=True)
    ids, mask = encode_pieces(Tokenizer.from_file(str(CHECKPOINT / "tokenizer.json")),
                              corpus.app_segments(corpus.DEFAULT_SYSTEM, turns))
    last, thinking = turns[-1]
    prompt = demo_runner.chat_ids(turns[:-1], last, thinking)
    assert ids[: len(prompt)] == prompt
    assert ids[len(prompt):] == demo_runner.app_prompts.encode(corpus.completion_text(last, thinking))
    # Every reply and its end token is trained, and nothing else.
    replies = [i for i, m in enumerate(mask) if m]
    assert sum(mask) == sum(len(demo_runner.app_prompts.encode(corpus.completion_text(ex, th))) for ex, th in turns)
    assert all(ids[i] == 2 for i in range(len(ids)) if mask[i] and (i + 1 == len(ids) or not mask[i + 1]))
    assert replies[-1] == len(ids) - 1


def test_a_chat_longer_than_the_trained_context_is_cut_after_a_whole_reply():
    from tokenizers import Tokenizer

    from training import train

    tok = Tokenizer.from_file(str(CHECKPOINT / "tokenizer.json"))
    ex = corpus.add_exchange(4321, 987, "What is 4321 + 987?")
    pieces = corpus.app_segments(None, [(ex, True)] * 40)
    ids, mask = train.encode_pieces(tok, pieces)
    assert train.MAX_LEN - 200 < len(ids) <= train.MAX_LEN == json.loads(
        (CHECKPOINT / "config.json").read_text())["text_config"]["max_position_embeddings"]
    assert ids[-1] == 2 and mask[-1] == 1


def test_weights_stored_narrower_than_declared_are_widened_at_load_and_only_then():
    import mlx.core as mx
    import mlx.nn as nn

    from engines.mlx.widening import declared_dtype, widen_to_declared

    def layer(dtype):
        module = nn.Linear(4, 4)
        module.set_dtype(dtype)
        return module

    assert declared_dtype({"text_config": {"dtype": "float32"}, "torch_dtype": "bfloat16"}) == "float32"
    assert declared_dtype({"torch_dtype": "bfloat16"}) == "bfloat16" and declared_dtype({}) is None
    for config in ({}, {"torch_dtype": "bfloat16"}, {"text_config": {"dtype": "float16"}}):
        module = layer(mx.float16)
        assert not widen_to_declared(module, config) and module.weight.dtype == mx.float16
    module = layer(mx.bfloat16)
    assert widen_to_declared(module, {"text_config": {"dtype": "float32"}})
    assert module.weight.dtype == module.bias.dtype == mx.float32
    assert not widen_to_declared(module, {"text_config": {"dtype": "float32"}})  # nothing left to widen


def test_the_shipped_float16_weights_compute_in_float32_in_specchat():
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from safetensors import safe_open

    from engines.mlx.loading import load_drafter, load_model

    with safe_open(str(CHECKPOINT / "model.safetensors"), "numpy") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}
    config = json.loads((CHECKPOINT / "config.json").read_text())
    assert config["text_config"]["dtype"] == "float32"
    loaded = load_model(str(CHECKPOINT))
    load_drafter(loaded, None)
    for module in (loaded.model, loaded.drafter):
        assert {v.dtype for _, v in tree_flatten(module.parameters())} == {mx.float32}
