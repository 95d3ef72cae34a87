"""A tiny Qwen 3.5 checkpoint that calls tools: its weights are written, not trained, so that greedy decoding follows
scripted token chains, built in about a second.

Every layer's output projections are zero but those of two attention heads, so a position's hidden state is its
token's embedding plus what those heads add: each head attends only to one trigger token (``<tool_response>``, or
a trigger word in the user's message) and raises a flag when the context holds it. The LM head maps a token (its
embedding's one-hot code) and the flags to the token's scripted successor, so a chain may go on differently after
a tool's result than before it. The MTP head copies the embedding of tool-call tokens only: it drafts well inside
calls and badly elsewhere, so the acceptance inside calls differs from the rest's.

The chat template is Qwen 3.5's in outline (tools in the system block, calls in the qwen3_coder XML form, results
as ``<tool_response>`` blocks in a user turn), and the tokenizer has one token for each piece of a chain, so that a
token that occurs in two chains is followed by the same token in both, or by tokens the flags tell apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from demo_model.architecture import TINY, text_config
from demo_model.checkpoint_files import (bpe_trainer, checkpoint_config, fresh_folder, random_parameters,
                                         save_checkpoint, save_tokenizer)

TEMPLATE = r"""{%- macro render_content(content) -%}
{%- if content is string -%}{{ content }}
{%- elif content -%}{%- for part in content if part.type == 'text' -%}{{ part.text }}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
{%- if tools -%}
<|im_start|>system
# Tools

You have access to the following functions:

<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
</function>
</tool_call>
{%- if messages and messages[0].role == 'system' %}

{{ render_content(messages[0].content) }}
{%- endif %}<|im_end|>
{% elif messages and messages[0].role == 'system' -%}
<|im_start|>system
{{ render_content(messages[0].content) }}<|im_end|>
{% endif -%}
{%- set ns = namespace(last_query=-1) -%}
{%- for message in messages -%}
{%- if message.role == 'user' -%}{%- set ns.last_query = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- for message in messages -%}
{%- if message.role == 'user' -%}
<|im_start|>user
{{ render_content(message.content) }}<|im_end|>
{% elif message.role == 'assistant' -%}
{%- set content = render_content(message.content) -%}
{%- set reasoning = message.reasoning_content or '' -%}
{%- if loop.index0 > ns.last_query and reasoning -%}
<|im_start|>assistant
<think>
{{ reasoning }}
</think>

{{ content }}
{%- else -%}
<|im_start|>assistant
{{ content }}
{%- endif -%}
{%- for call in message.tool_calls or [] -%}
{%- set call = call.function if call.function is defined else call -%}
{{ '\n' if (content or not loop.first) else '' }}<tool_call>
<function={{ call.name }}>
{% for name, value in call.arguments | items -%}
<parameter={{ name }}>
{{ value | tojson if value is mapping or (value is sequence and value is not string) else value }}
</parameter>
{% endfor -%}
</function>
</tool_call>
{%- endfor -%}
<|im_end|>
{% elif message.role == 'tool' -%}
{%- if loop.previtem and loop.previtem.role != 'tool' -%}<|im_start|>user{%- endif %}
<tool_response>
{{ render_content(message.content) }}
</tool_response>
{%- if loop.last or loop.nextitem.role != 'tool' -%}<|im_end|>
{% endif -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false -%}
<think>

</think>

{% else -%}
<think>
{% endif -%}
{%- endif -%}
"""

# The pieces of the scripted calls, each one token (``_tokenizer``).
CALC_OPEN = "\n<function=calculator>\n<parameter=expression>\n"
ADD_OPEN = "\n<function=add>\n<parameter=a>\n"
ADD_NEXT = "\n</parameter>\n<parameter=b>\n"
CLOSE = "\n</parameter>\n</function>\n"
NOT_XML = '\n{"name": "calculator"}\n'
RESULT_OPEN, RESULT_CLOSE = "<tool_response>", "</tool_response>"
BOTCH, TALLY = "botch", "tally"  # a user's message with one of them gets the malformed call, or the typed one
ADDED = [RESULT_OPEN, RESULT_CLOSE, BOTCH, TALLY]  # tokens of their own wherever they stand in a text

# The flags a context can raise, each from its trigger token: a tool's result, and the two trigger words.
RESULT, BOTCHED, TALLIED = "result", "botched", "tallied"
TRIGGERS = {RESULT: RESULT_OPEN, BOTCHED: BOTCH, TALLIED: TALLY}
THINK_OPEN, THINK_SKIP = "<think>\n", "</think>\n\n"  # how a prompt ends with thinking on, and off
CALL = ["<tool_call>", CALC_OPEN, "2", "+", "3", CLOSE, "</tool_call>"]


@dataclass(frozen=True)
class Chain:
    """What the model writes after a prompt that ends with ``after``, in a context that raises ``flags``."""

    after: str
    flags: frozenset
    pieces: tuple[str, ...]


# With thinking on: "What is 2+3?" calls the calculator, and its result is answered.
CALLS = Chain(THINK_OPEN, frozenset(), ("Use", " the", " calculator", ".", "</think>", *CALL, "<|im_end|>"))
ANSWERS = Chain(THINK_OPEN, frozenset({RESULT}), ("Got", " it", ".", "</think>", "The", " answer", " is", " 5",
                                                  "<|im_end|>"))
# With thinking off: a call whose body is not the XML form, and a call of ``add`` whose values the schema types.
MALFORMED = Chain(THINK_SKIP, frozenset({BOTCHED}), ("<tool_call>", NOT_XML, "</tool_call>", "<|im_end|>"))
TYPED = Chain(THINK_SKIP, frozenset({TALLIED}), ("<tool_call>", ADD_OPEN, "4", ADD_NEXT, "6", CLOSE, "</tool_call>",
                                                 "<|im_end|>"))
CHAINS = (CALLS, ANSWERS, MALFORMED, TYPED)
CALL_PIECES = {"<tool_call>", "</tool_call>", CALC_OPEN, ADD_OPEN, ADD_NEXT, CLOSE, NOT_XML, "2", "+", "3", "4", "6"}

ADD_TOOL = {"type": "function", "function": {
    "name": "add", "description": "Adds two whole numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}

# Hidden dimensions: a constant, each trigger token's mark, each flag, then one-hot codes of the chains' tokens.
BIAS, MARKS, FLAGS, CODES = 0, {RESULT: 1, BOTCHED: 2, TALLIED: 3}, {RESULT: 4, BOTCHED: 5, TALLIED: 6}, 7
# (layer, kv head, query head) of the head that raises each flag; a query head attends with kv head q // 2.
HEADS = {RESULT: (1, 0, 0), BOTCHED: (1, 1, 2), TALLIED: (3, 0, 0)}
FEATURE = 40  # the query and key feature the heads use: past the 16 leading ones the rotary embedding turns
CODE, FLAG = 10.0, 2.0  # the LM head's weight on a token's code, and on the flags that tell its successors apart


def build_tool_checkpoint(out: Path, seed: int = 0) -> Path:
    """Write the scripted checkpoint to ``out`` and return it; a ValueError names a chain it cannot script (a
    piece that is not one token, a token whose successors the flags cannot tell apart)."""
    import mlx.core as mx
    from tokenizers import AddedToken

    out = fresh_folder(out)
    tok = _tokenizer()
    tok.add_tokens([AddedToken(token, normalized=False) for token in ADDED])
    ids = save_tokenizer(tok, out)
    (out / "chat_template.jinja").write_text(TEMPLATE)
    config_path = out / "tokenizer_config.json"
    config_path.write_text(json.dumps(json.loads(config_path.read_text()) | {"chat_template": TEMPLATE}, indent=2))
    vocab = ids["vocab_size"]
    config = checkpoint_config(ids, text_config(vocab, replace(TINY, tied=False)))
    weights = random_parameters(config, seed)

    def one(text: str) -> int:
        encoded = tok.encode(text, add_special_tokens=False).ids
        if len(encoded) != 1:
            raise ValueError(f"the scripted model needs {text!r} to be one token; it is {encoded}")
        return encoded[0]

    successors = _successors(one)
    codes = {token: CODES + n for n, token in enumerate(sorted({p for p, _, _ in successors}))}
    if CODES + len(codes) > config["text_config"]["hidden_size"]:
        raise ValueError(f"{len(codes)} chain tokens do not fit the hidden size")
    hidden = config["text_config"]["hidden_size"]
    embed = mx.zeros((vocab, hidden)).at[:, BIAS].add(1.0)
    for token, dim in codes.items():
        embed = embed.at[token, dim].add(1.0)
    for flag, trigger in TRIGGERS.items():
        embed = embed.at[one(trigger), MARKS[flag]].add(1.0)
    weights["language_model.model.embed_tokens.weight"] = embed
    for key in [k for k in weights if k.endswith(("o_proj.weight", "out_proj.weight", "down_proj.weight",
                                                     "q_proj.weight", "k_proj.weight", "v_proj.weight"))]:
        weights[key] = mx.zeros_like(weights[key])
    for flag, (layer, kv, query) in HEADS.items():
        _flag_head(weights, f"language_model.model.layers.{layer}.self_attn", flag, kv, query)
    weights["language_model.lm_head.weight"] = _head(vocab, hidden, successors, codes)
    fc = mx.zeros(weights["mtp.fc.weight"].shape).at[BIAS, BIAS].add(1.0)
    for piece in CALL_PIECES:  # the drafter sees a call's tokens (the embedding half of its input), no other
        fc = fc.at[codes[one(piece)], codes[one(piece)]].add(1.0)
    weights["mtp.fc.weight"] = fc
    save_checkpoint(out, config, weights)
    return out


def _tokenizer():
    """A byte-level BPE in which each chain piece is one token: trained on the pieces, each a text of its own (no
    split into words, so a piece with line breaks is one token too), and on a prompt's instructions and tools, so
    that prompts take few tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    from webapp.tools.builtin import builtin_tools

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    pieces = {piece for chain in CHAINS for piece in chain.pieces} | {THINK_OPEN[-1:], THINK_SKIP[-2:]}
    prompt = TEMPLATE + "".join(json.dumps(tool.spec().function()) for tool in builtin_tools().values())
    tok.train_from_iterator([*sorted(pieces), prompt] * 20, trainer=bpe_trainer(1500))
    return tok


def _successors(one) -> list[tuple[int, int, frozenset | None]]:
    """(token, successor, flags that pick it or None when the token has one successor) for every chain step."""
    steps = {}
    for chain in CHAINS:
        tokens = [one(chain.after[-2:] if chain.after == THINK_SKIP else chain.after[-1:]),
                  *(one(p) for p in chain.pieces)]
        for token, successor in zip(tokens, tokens[1:]):
            steps.setdefault(token, {}).setdefault(successor, set()).add(chain.flags)
    out = []
    for token, after in steps.items():
        for successor, flags in after.items():
            if len(after) > 1 and len(flags) > 1:
                raise ValueError(f"token {token} leads to {successor} under several flag sets: script it apart")
            out.append((token, successor, next(iter(flags)) if len(after) > 1 else None))
    return out


def _flag_head(weights: dict, prefix: str, flag: str, kv: int, query: int) -> None:
    """One head that attends to ``flag``'s trigger token and, when the context holds it, adds about 1 to the
    flag's dimension of every later position (0 otherwise: every other token's value is 0)."""
    import mlx.core as mx

    head_dim, feature = TINY.head_dim, FEATURE
    q = weights[f"{prefix}.q_proj.weight"].at[query * 2 * head_dim + feature, BIAS].add(1.0)
    k = weights[f"{prefix}.k_proj.weight"].at[kv * head_dim + feature, MARKS[flag]].add(1.0)
    v = weights[f"{prefix}.v_proj.weight"].at[kv * head_dim + feature, MARKS[flag]].add(1.0)
    # Normalised, query and key are 8 x their norm's weight at ``feature``: a score of 8 * 2 * 2 = 32 for the
    # trigger and 0 elsewhere. The trigger's normalised mark is sqrt(32) (its embedding holds two ones), halved by
    # the output gate (sigmoid(0)).
    o = weights[f"{prefix}.o_proj.weight"].at[FLAGS[flag], query * head_dim + feature].add(1.0 / (32 ** 0.5 / 2))
    weights[f"{prefix}.q_proj.weight"], weights[f"{prefix}.k_proj.weight"] = q, k
    weights[f"{prefix}.v_proj.weight"], weights[f"{prefix}.o_proj.weight"] = v, o
    weights[f"{prefix}.q_norm.weight"] = mx.full((head_dim,), 2.0)
    weights[f"{prefix}.k_norm.weight"] = mx.full((head_dim,), 2.0)


def _head(vocab: int, hidden: int, successors, codes: dict[int, int]):
    """The LM head: a token's code points to its successor; where a token has several, the flags choose (the
    successor wanting flags F scores FLAG * (flags of F present - other flags present - |F| + 1/2))."""
    import numpy as np
    import mlx.core as mx

    head = np.zeros((vocab, hidden), dtype=np.float32)
    for token, successor, flags in successors:
        head[successor, codes[token]] += CODE
        if flags is not None:
            for flag, dim in FLAGS.items():
                head[successor, dim] += FLAG if flag in flags else -FLAG
            head[successor, BIAS] -= FLAG * (len(flags) - 0.5)
    return mx.array(head)
