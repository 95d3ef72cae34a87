"""The corpus and chat template prepared for the demo model's retrain with tools (issue 48), on the CPU: the template
renders every chat without tools as the shipped one does, and with tools as Qwen 3.5's; the tools chats are the
text specchat sends, their calls parse with mlx-vlm's parser, and the corpus without them is what it was."""

import hashlib
import json
import random

import pytest

from demo_model import DEFAULT_MODEL
from training import corpus, tools_corpus
from training.evaluate import HELD_OUT_DATE, TOOL_CLASSES, read_call, right_call, tool_probes

TOOLS = tuple(tools_corpus.TOOL_SPECS.values())


@pytest.fixture(scope="module")
def tokenizers():
    """(shipped, retrained): the demo tokenizer with the shipped template, and with the tools template."""
    from transformers import AutoTokenizer

    shipped = AutoTokenizer.from_pretrained(str(DEFAULT_MODEL))
    retrained = AutoTokenizer.from_pretrained(str(DEFAULT_MODEL))
    retrained.chat_template = tools_corpus.TEMPLATE_FILE.read_text()
    return shipped, retrained


@pytest.fixture(scope="module")
def config():
    return json.loads((DEFAULT_MODEL / "config.json").read_text())


def render(tokenizer, config, messages, thinking, tools=(), generation_prompt=True):
    """As specchat renders a prompt (engines.mlx.prompts.PromptBuilder.render)."""
    from mlx_vlm.prompt_utils import apply_chat_template

    extra = {"tools": list(tools)} if tools else {}
    return apply_chat_template(tokenizer, config, messages, add_generation_prompt=generation_prompt,
                               enable_thinking=thinking, **extra)


def message_lists(rng: random.Random, count: int) -> list[list[dict]]:
    """Chats of the corpus's exchanges: with or without a system prompt, past replies with and without their
    reasoning, ending with a question or (a continued reply) with an assistant message."""
    out = []
    for _ in range(count):
        system = rng.choice([None, "", corpus.DEFAULT_SYSTEM, rng.choice(corpus.SYSTEM_PROMPTS)])
        messages = [{"role": "system", "content": system}] if system is not None else []
        for ex, thinking in corpus.conversation(rng, rng.randint(1, 4), augment=True):
            messages.append({"role": "user", "content": ex.user})
            reply = {"role": "assistant", "content": ex.reply(thinking)}
            if thinking and rng.random() < 0.5:
                reply["reasoning_content"] = ex.reasoning
            elif thinking and rng.random() < 0.5:
                reply["content"] = f"<think>\n{ex.reasoning}\n</think>\n\n{ex.reply(True)}"
            messages.append(reply)
        out.append(messages if rng.random() < 0.3 else messages[:-1])
    return out


def test_without_tools_the_template_renders_every_chat_as_the_shipped_one(tokenizers, config):
    shipped, retrained = tokenizers
    for messages in message_lists(random.Random(48), 100):
        for thinking in (True, False):
            for prompt in (True, False):
                assert (render(retrained, config, messages, thinking, generation_prompt=prompt)
                        == render(shipped, config, messages, thinking, generation_prompt=prompt))


def test_the_template_is_read_as_qwen3_coder_whose_markers_are_single_tokens(tokenizers):
    from mlx_vlm.tools import load_tool_module

    from engines.mlx.library import tool_parser_name

    shipped, retrained = tokenizers
    assert tool_parser_name(retrained) == "qwen3_coder"
    assert tool_parser_name(shipped) is None  # the shipped template shows no tools
    parser = load_tool_module("qwen3_coder")
    for marker in (parser.tool_call_start, parser.tool_call_end):
        assert len(retrained.encode(marker, add_special_tokens=False)) == 1


def _tool_chat(thinking: bool) -> list[dict]:
    reasoning = "A percentage: the calculator." if thinking else ""
    return [{"role": "system", "content": corpus.DEFAULT_SYSTEM}, {"role": "user", "content": "What is 15% of 80?"},
            {"role": "assistant", "content": "", "reasoning_content": reasoning,
             "tool_calls": [{"id": "c", "type": "function",
                             "function": {"name": "calculator", "arguments": '{"expression": "15% of 80"}'}}]},
            {"role": "tool", "tool_call_id": "c", "content": "12"}]


@pytest.mark.parametrize("thinking", [True, False])
def test_with_tools_the_template_writes_qwen_3_5s_blocks_and_its_call_parses_back(tokenizers, config, thinking):
    from mlx_vlm.tools import load_tool_module

    _, retrained = tokenizers
    messages = _tool_chat(thinking)
    text = render(retrained, config, messages, thinking, TOOLS)
    assert text.startswith(tools_corpus.tools_system(corpus.DEFAULT_SYSTEM, list(TOOLS)))
    assert '"name": "calculator"' in text and '"name": "clock"' in text
    reasoning = "A percentage: the calculator." if thinking else ""
    assert (f"<|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n<tool_call>\n<function=calculator>\n"
            "<parameter=expression>\n15% of 80\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n") in text
    call = read_call(text.split("<|im_start|>assistant\n")[1], load_tool_module("qwen3_coder"), list(TOOLS))
    assert call == {"name": "calculator", "arguments": {"expression": "15% of 80"}}
    # The results of two calls go in one user turn.
    two = messages[:2] + [dict(messages[2], tool_calls=messages[2]["tool_calls"] * 2), messages[3], messages[3]]
    assert ("<|im_start|>user\n<tool_response>\n12\n</tool_response>\n<tool_response>\n12\n</tool_response><|im_end|>"
            in render(retrained, config, two, thinking, TOOLS))


def _tool_samples(count: int, seed: int = 1) -> list[list[tuple[str, bool]]]:
    rng = random.Random(seed)
    return [tools_corpus.sample_segments(rng, augment=True) for _ in range(count)]


def test_tools_chats_are_the_text_the_template_and_specchat_write(tokenizers, config):
    """Each tools chat is the template's render of its messages, pieced as specchat sends them: the first turn
    rendered whole, a result as the template writes it after the call (PromptBuilder.tool_result_ids)."""
    _, retrained = tokenizers
    rng = random.Random(7)
    checked = 0
    for _ in range(40):
        system = rng.choice([None, corpus.DEFAULT_SYSTEM])
        offered = rng.choice(tools_corpus.OFFERED)
        turns = tools_corpus.tool_conversation(rng, 1, True, offered)
        ex, thinking = turns[0]
        if not isinstance(ex, tools_corpus.ToolExchange):
            continue
        tools = [tools_corpus.TOOL_SPECS[name] for name in offered]
        pieces = tools_corpus.app_segments(system, offered, turns)
        head = [{"role": "system", "content": system}] if system else []
        user = head + [{"role": "user", "content": ex.user}]
        assert pieces[0][0] == render(retrained, config, user, thinking, tools)
        call = {"role": "assistant", "content": "", "reasoning_content": ex.reasoning if thinking else "",
                "tool_calls": [{"id": "c", "type": "function",
                                "function": {"name": ex.tool, "arguments": json.dumps(ex.arguments)}}]}
        said = render(retrained, config, user + [call], thinking, tools, generation_prompt=False)
        whole = render(retrained, config, user + [call, {"role": "tool", "tool_call_id": "c", "content": ex.result}],
                       thinking, tools)
        assert whole.startswith(said) and said.endswith("<|im_end|>\n")
        assert pieces[0][0] + pieces[1][0] == said[:-1]  # the call as the model writes it, up to its end token
        assert pieces[2][0] + pieces[3][0] == "\n" + whole[len(said):]
        checked += 1
    assert checked > 10


def test_tools_chats_tokenize_and_their_calls_parse_with_the_results_the_app_sends():
    from mlx_vlm.tools import load_tool_module
    from tokenizers import Tokenizer

    from training.train import encode_pieces

    tok = Tokenizer.from_file(str(DEFAULT_MODEL / "tokenizer.json"))
    parser = load_tool_module("qwen3_coder")
    calls = {"calculator": 0, "clock": 0}
    samples = _tool_samples(300)
    for pieces in samples:
        ids, mask = encode_pieces(tok, pieces)
        assert ids and mask[-1] == 1 and ids[-1] == tok.token_to_id("<|im_end|>")
        for i, (text, trained) in enumerate(pieces):
            if not (trained and "<tool_call>" in text):
                continue
            encoded = tok.encode(text, add_special_tokens=False).ids
            assert encoded.count(tok.token_to_id("<tool_call>")) == encoded.count(tok.token_to_id("</tool_call>")) == 1
            call = read_call(text, parser, list(TOOLS))
            result = pieces[i + 2][0].split("<tool_response>\n")[1].split("\n</tool_response>")[0]
            if call["name"] == "calculator":
                assert tools_corpus.run_tool("calculator", call["arguments"]) == result
            else:
                assert call["arguments"]["action"] in ("today", "now") and result[:3] in {d[:3] for d in corpus.DAYS}
            # The answer copies the result, and a date is only ever the clock's.
            assert result in pieces[i + 3][0]
            calls[call["name"]] += 1
    assert calls["calculator"] > 100 and calls["clock"] > 30


def test_tools_chats_answer_what_needs_no_tool_and_keep_limits_where_the_tool_is_off():
    rng = random.Random(5)
    own = limits = 0
    for _ in range(400):
        offered = rng.choice(tools_corpus.OFFERED)
        for ex, _ in tools_corpus.tool_conversation(rng, 2, True, offered):
            if isinstance(ex, tools_corpus.ToolExchange):
                assert ex.tool in offered
            elif ex.reply(True) in tools_corpus.CALCULATOR_LIMITS or ex.reply(True) == corpus.FALLBACK:
                limits += "calculator" not in offered or ex.reply(True) == corpus.FALLBACK
            else:
                own += 1
    assert own > 200 and limits > 10


def test_with_tools_off_the_questions_a_tool_answers_get_their_limits_and_no_call():
    """Chats with no tools block: a model shown only calls for these questions writes call markup with tools
    off too (seen in a retrain: 4 of 5 date questions, thinking on, began a call no one could run)."""
    rng = random.Random(11)
    chats = [tools_corpus.sample_segments(rng, augment=True) for _ in range(600)]
    plain = [pieces for pieces in chats if not pieces[0][0].startswith("<|im_start|>system\n# Tools")]
    assert len(plain) > 100
    assert not any("<tool_call>" in text or "<tool_response>" in text for pieces in plain for text, _ in pieces)
    date_limits = {True: 0, False: 0}
    rng = random.Random(12)
    for _ in range(400):
        for ex, thinking in tools_corpus.tool_conversation(rng, 2, True, ()):
            assert not isinstance(ex, tools_corpus.ToolExchange)
            if ex.reply(thinking) == corpus.FALLBACK and "date" in ex.user.lower():
                date_limits[thinking] += 1
    assert min(date_limits.values()) > 5, date_limits


def test_the_tools_corpus_never_asks_a_held_out_tool_question():
    rng = random.Random(9)
    questions = [ex.user.lower() for _ in range(3_000)
                 for ex, _ in tools_corpus.tool_conversation(rng, 1, True, ("calculator", "clock"))]
    held_out = {q.lower().rstrip("?.") for q in HELD_OUT_DATE}
    assert not [q for q in questions if q.rstrip("?.") in held_out]
    asked = tool_probes(3, seed=5)
    assert [cls for cls, _ in asked] == [c for c in TOOL_CLASSES for _ in range(3)]
    for _, probe in asked:
        assert right_call({"name": probe.tool, "arguments": probe.arguments}, probe)
        assert not right_call({"name": probe.tool, "arguments": {"expression": "1 + 1", "action": "now"}}, probe)


def _digest(samples) -> str:
    return hashlib.sha256(json.dumps(samples).encode()).hexdigest()


def test_the_default_corpus_is_unchanged_by_the_tools_option():
    for seed, augment in [(0, False), (5, True)]:
        default = corpus.training_samples(seed, 400, augment)
        assert _digest(corpus.training_samples(seed, 400, augment, tools_share=0.0)) == _digest(default)
        assert corpus.samples(seed, 100, augment, tools_share=0.0) == corpus.samples(seed, 100, augment)
        assert not any("<tool_call>" in text for pieces in default for text, _ in pieces)
    with_tools = corpus.training_samples(0, 400, True, tools_share=0.5)
    # Half the chats are tools chats, and those with tools offered carry the tools block.
    offered = sum(w for o, w in zip(tools_corpus.OFFERED, tools_corpus.OFFERED_WEIGHTS) if o)
    expected = 400 * 0.5 * offered / sum(tools_corpus.OFFERED_WEIGHTS)
    assert expected - 50 < sum("# Tools" in pieces[0][0] for pieces in with_tools) < expected + 50


def test_tool_tokens_make_a_results_markers_single_tokens_and_the_weights_grow_to_them(tmp_path):
    """``--tool-tokens``: the tokenizer a retrain starts from spells <tool_response> and </tool_response> in one
    token each, as Qwen 3.5's does; the rest encodes as before, and the shipped weights grow a row for each."""
    import numpy as np
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from training.train import grown

    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (tmp_path / name).write_bytes((DEFAULT_MODEL / name).read_bytes())
    shipped = Tokenizer.from_file(str(DEFAULT_MODEL / "tokenizer.json"))
    tools_corpus.install_template(tmp_path)
    assert tools_corpus.install_tool_tokens(tmp_path) == shipped.get_vocab_size() + 2
    assert tools_corpus.install_tool_tokens(tmp_path) == shipped.get_vocab_size() + 2  # once only
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    result = "\n<|im_start|>user\n<tool_response>\n12\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n"
    assert (len(tok.encode(result).ids), len(shipped.encode(result).ids)) == (17, 34)
    assert tok.decode(tok.encode(result).ids, skip_special_tokens=True).count("tool_response>") == 2
    rng = random.Random(3)
    for pieces in (tools_corpus.sample_segments(rng, augment=True) for _ in range(50)):
        text = "".join(piece for piece, _ in pieces)
        if "<tool_response>" not in text:
            assert tok.encode(text).ids == shipped.encode(text).ids
    state = load_file(str(DEFAULT_MODEL / "model.safetensors"))
    key = "language_model.model.embed_tokens.weight"
    shapes = {k: v.shape for k, v in state.items()} | {key: (tok.get_vocab_size(), state[key].shape[1])}
    bigger = grown(state, shapes)
    assert bigger[key].shape == shapes[key] and np.array_equal(bigger[key][:-2], state[key])
    assert np.allclose(bigger[key][-1], state[key].astype(np.float32).mean(axis=0), atol=1e-3)
    assert all(np.array_equal(bigger[k], v) for k, v in state.items() if k != key)
