"""Qwen 3.5 forward passes as pure, compiled functions over fixed-size caches.

The model comes as specchat's own parts (parts.py), which qwen35.py copies
from mlx-vlm's modules at load, checking that these steps compute what
mlx-vlm's forward does; this module only changes how a step is run. Each
cache is a plain array: attention keys and values live in buffers of
a fixed capacity written at a position (so a rejected draft is undone by not
advancing the offset), and the gated-delta layers return their recurrent state
after every position of a block (so partial acceptance picks the state after
the last kept token instead of recomputing it). Nothing here copies a cache or
waits for the device: a whole step is one compiled graph, evaluated when the
caller needs a token.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .parts import Attention, Body, GatedDelta, MtpHead, Rotary
from .sampling import probabilities, sample

CAPACITY_STEP = 1024  # attention buffers grow by this many positions
SHORT_FEED = 16  # feeds up to this long run compiled (a few lengths: phase changes, short turns)
SEQUENTIAL_FEED = 48  # up to this long the per-position recurrence beats the chunked scan (measured on a CPU)
TAIL = 512  # prompt positions whose hidden states a prefill returns: the MTP head is primed with them


def _mx():
    import mlx.core as mx

    return mx


@dataclass
class TargetCaches:
    """The target's whole state after ``offset`` tokens."""

    offset: int
    capacity: int
    layers: list[tuple[Any, Any]]  # attention: (keys, values) buffers; linear: (conv, ssm) state
    # Text fed from now on is rotated at its slot plus this: after an image, M-RoPE positions run behind
    # the slots (an image's tokens span only its grid's longest side), by the model's rope delta.
    shift: int = 0

    def snapshot(self) -> "TargetCaches":
        """A copy that later steps leave alone: arrays are values, so the first write copies."""
        return TargetCaches(self.offset, self.capacity, None if self.layers is None else list(self.layers),
                            self.shift)

    def nbytes(self) -> int:
        return sum(a.nbytes + b.nbytes for a, b in self.layers)


@dataclass
class DrafterCaches:
    """The MTP head's attention buffers and the seed of its next draft.

    Slot ``i`` of the buffers is also the entry's rotary position: only
    distances between entries matter to attention.
    """

    offset: int
    capacity: int
    layers: list[tuple[Any, Any]]
    seed_token: Any = None  # (1, 1) int32: the head's guess for the token after the last bonus
    seed_hidden: Any = None  # (1, 1, D): the head's hidden state that produced it
    chained: int = 0  # entries the last draft appended, not yet confirmed by a verify
    seed_probs: Any = None  # (1, 1, V) when sampling: the distribution the seed was drawn from

    def snapshot(self) -> "DrafterCaches":
        return DrafterCaches(self.offset, self.capacity, list(self.layers), self.seed_token, self.seed_hidden,
                             self.chained, self.seed_probs)

    def nbytes(self) -> int:
        return sum(a.nbytes + b.nbytes for a, b in self.layers)


@dataclass
class ImageFeed:
    """What a prompt part holding image placeholders is fed as."""

    embeds: Any  # (1, n, D): the tokens' embeddings, the vision tower's features at the placeholders
    positions: Any  # (3, 1, n): M-RoPE positions (time, height, width), the same in every row for text
    shift: int  # after the part, text is rotated at its slot plus this (the model's rope delta)


@dataclass
class VerifyResult:
    hidden: Any  # (1, L, D) final-norm hidden states
    tokens: Any  # (1, L) greedy targets, or None when sampling
    logits: Any  # (1, L, V) when sampling, else None
    layers: list[tuple[Any, Any]]  # attention buffers written; linear: (conv input, states per position)


def _attention_mask(positions, capacity: int):
    mx = _mx()
    return mx.arange(capacity)[None, :] <= positions[0][:, None]


def rotate(rotary: Rotary, queries, keys, positions, position_ids, mrope: bool = False):
    """Rotary embedding of ``queries`` and ``keys`` (heads first) at ``positions``, consecutive; ``mrope``:
    at ``position_ids`` (3, 1, L), whose rows differ (an image's tokens), through the model's own MRoPE."""
    mx = _mx()
    if rotary.periods is None or mrope:
        return rotary.apply(queries, keys, position_ids, unsqueeze_dim=1)
    start = positions[0, 0]
    return tuple(mx.fast.rope(t, rotary.dims, traditional=False, base=None, scale=1.0, offset=start,
                              freqs=rotary.periods) for t in (queries, keys))


def _attend(attn: Attention, x, positions, position_ids, keys_buf, values_buf, mask,
            visible: int | None = None, keep: int | None = None, mrope: bool = False):
    """One Qwen 3.5 attention block over a buffer; returns (output, keys, values).

    ``positions`` are the buffer slots written, ``position_ids`` the rotary positions ((3, 1, L) for the
    target, whose first row is a text run's positions; the slots for the MTP head).

    ``visible`` (a prompt's chunk, run uncompiled): attend causally over the buffer's first
    ``visible`` positions only, instead of masking the whole buffer; ``keep``: only the last
    ``keep`` positions' outputs are wanted (every position's keys and values are still written).
    """
    mx = _mx()
    B, L, _ = x.shape
    q_out, k_out, v_out = attn.qkv(x)
    queries, gate = mx.split(q_out.reshape(B, L, attn.heads, -1), 2, axis=-1)
    gate = gate.reshape(B, L, -1)
    queries = attn.q_norm(queries).transpose(0, 2, 1, 3)
    keys = attn.k_norm(k_out.reshape(B, L, attn.kv_heads, -1)).transpose(0, 2, 1, 3)
    values = v_out.reshape(B, L, attn.kv_heads, -1).transpose(0, 2, 1, 3)
    text = position_ids[0] if position_ids.ndim == 3 else position_ids
    queries, keys = rotate(attn.rotary, queries, keys, text, position_ids, mrope)
    at = positions[0, :1]
    keys_buf = mx.slice_update(keys_buf, keys.astype(keys_buf.dtype), at, axes=(2,))
    values_buf = mx.slice_update(values_buf, values.astype(values_buf.dtype), at, axes=(2,))
    if keep is not None:
        queries, gate, L = queries[:, :, -keep:], gate[:, -keep:], keep
    if visible is None:
        out = mx.fast.scaled_dot_product_attention(queries, keys_buf, values_buf, scale=attn.scale, mask=mask)
    else:
        out = mx.fast.scaled_dot_product_attention(queries, keys_buf[:, :, :visible], values_buf[:, :, :visible],
                                                   scale=attn.scale, mask="causal")
    out = out.transpose(0, 2, 1, 3).reshape(B, L, -1)
    return attn.o_proj(out * mx.sigmoid(gate)), keys_buf, values_buf


def _depthwise_conv(x, weight, length: int):
    """A causal depthwise convolution as a sum of shifted products: a handful of fusable
    elementwise ops, several times cheaper than a grouped ``conv1d`` for a few positions."""
    mx = _mx()
    taps, dtype = weight.shape[1], x.dtype
    x, weight = x.astype(mx.float32), weight.astype(mx.float32)  # half-precision models sum in float32
    out = x[:, :length] * weight[:, 0, 0]
    for j in range(1, taps):
        out = out + x[:, j : j + length] * weight[:, j, 0]
    return out.astype(dtype)


def _gated_delta(gd: GatedDelta, x, conv_state, ssm_state, with_states: bool):
    """One gated-delta block; returns (output, conv input, final or per-position states)."""
    import mlx.nn as nn

    from .library import gated_delta_update
    from .recurrence import with_states as gated_delta_with_states

    mx = _mx()
    B, L, _ = x.shape
    mixed, z, b, a = gd.inputs(x)
    z = z.reshape(B, L, -1, gd.v_dim)
    conv_input = mx.concatenate([conv_state.astype(mixed.dtype), mixed], axis=1)
    conv_out = nn.silu(_depthwise_conv(conv_input, gd.conv_weight, L))
    q, k, v = [
        t.reshape(B, L, h, d)
        for t, h, d in zip(
            mx.split(conv_out, [gd.key_dim, 2 * gd.key_dim], -1),
            [gd.k_heads, gd.k_heads, gd.v_heads],
            [gd.k_dim, gd.k_dim, gd.v_dim],
        )
    ]
    q, k = gd.normalize_qk(q, k)
    if with_states:
        y, _, states = gated_delta_with_states(q, k, v, a, b, gd.A_log, gd.dt_bias, ssm_state)
        # Index i holds the state after i positions, so keeping none restores the state fed in.
        states = mx.concatenate([ssm_state[:, None].astype(states.dtype), states], axis=1)
    else:
        y, states = gated_delta_update(q, k, v, a, b, gd.A_log, gd.dt_bias, state=ssm_state)
    out = gd.out_proj(gd.norm(y, z).reshape(B, L, -1))
    return out, conv_input, states


class TargetStepper:
    """The target model's forward as compiled functions: one per (block length, capacity, kind)."""

    def __init__(self, body: Body):
        self.body = body
        self.layers = body.layers
        first = next(layer.mixer for layer in self.layers if not layer.is_linear)
        self.kv_heads, self.head_dim = first.kv_heads, first.head_dim
        gdn = next((layer.mixer for layer in self.layers if layer.is_linear), None)
        self.conv_width = gdn.conv_kernel - 1 if gdn else 0
        self.conv_dim = gdn.conv_dim if gdn else 0
        self.ssm_shape = (gdn.v_heads, gdn.v_dim, gdn.k_dim) if gdn else ()
        self.dtype = body.dtype
        self._compiled: dict[tuple, Any] = {}

    def head(self, hidden):
        return self.body.head(hidden)

    def new_caches(self, capacity: int = CAPACITY_STEP) -> TargetCaches:
        mx = _mx()
        layers = []
        for layer in self.layers:
            if layer.is_linear:
                layers.append((mx.zeros((1, self.conv_width, self.conv_dim), dtype=self.dtype),
                               mx.zeros((1, *self.ssm_shape), dtype=mx.float32)))
            else:
                shape = (1, self.kv_heads, capacity, self.head_dim)
                layers.append((mx.zeros(shape, dtype=self.dtype), mx.zeros(shape, dtype=self.dtype)))
        return TargetCaches(0, capacity, layers)

    def reserve(self, caches: TargetCaches, needed: int) -> None:
        """Grow the attention buffers so ``needed`` positions fit."""
        if needed <= caches.capacity:
            return
        mx = _mx()
        capacity = -(-needed // CAPACITY_STEP) * CAPACITY_STEP
        grown = []
        for layer, (a, b) in zip(self.layers, caches.layers):
            if layer.is_linear:
                grown.append((a, b))
            else:
                pad = [(0, 0), (0, 0), (0, capacity - caches.capacity), (0, 0)]
                grown.append((mx.pad(a, pad), mx.pad(b, pad)))
        caches.layers, caches.capacity = grown, capacity

    def _forward(self, tokens, positions, rope, layers, *, with_states: bool, greedy: bool, capacity: int,
                 visible: int | None = None, keep: int | None = None, embeds=None):
        """``positions``: the slots written; ``rope``: the rotary positions, (1, L) for text, (3, 1, L) for a
        chunk with image tokens (whose ``embeds`` replace the tokens' embeddings). ``visible`` set: a prompt
        chunk (no logits; attention over the filled positions only), whose hidden states are computed for
        the last ``keep`` positions only."""
        mx = _mx()
        h = self.body.embed(tokens) if embeds is None else embeds
        mrope = rope.ndim == 3
        position_ids = rope if mrope else mx.broadcast_to(rope[None], (3, *rope.shape))
        mask = None if visible is not None else _attention_mask(positions, capacity)
        out_layers = []
        last = len(self.layers) - 1
        for i, (layer, (a, b)) in enumerate(zip(self.layers, layers)):
            x = layer.input_norm(h)
            tail = keep if i == last else None  # past the last layer's caches only the tail goes on
            if layer.is_linear:
                r, a, b = _gated_delta(layer.mixer, x, a, b, with_states)
            else:
                r, a, b = _attend(layer.mixer, x, positions, position_ids, a, b, mask, visible, tail, mrope)
            out_layers.append((a, b))
            if tail is not None:
                h, r = h[:, -tail:], r[:, -tail:]
            h = h + r
            h = h + layer.mlp(layer.post_norm(h))
        hidden = self.body.norm(h)
        if visible is not None:
            return hidden, None, out_layers
        logits = self.head(hidden)
        if greedy:
            return hidden, mx.argmax(logits, axis=-1).astype(mx.int32), out_layers
        return hidden, logits, out_layers

    def _function(self, length: int, capacity: int, with_states: bool, greedy: bool):
        key = (length, capacity, with_states, greedy)
        fn = self._compiled.get(key)
        if fn is None:
            mx = _mx()

            def step(tokens, positions, rope, layers):
                return self._forward(tokens, positions, rope, layers, with_states=with_states, greedy=greedy,
                                     capacity=capacity)

            fn = self._compiled[key] = mx.compile(step)
        return fn

    def verify(self, caches: TargetCaches, tokens, greedy: bool = True) -> VerifyResult:
        """Run ``tokens`` (1, L) after ``caches.offset``; the caches then wait for ``commit``."""
        mx = _mx()
        length = tokens.shape[1]
        self.reserve(caches, caches.offset + length)
        positions = (mx.arange(length, dtype=mx.int32) + caches.offset)[None]
        fn = self._function(length, caches.capacity, True, greedy)
        hidden, out, layers = fn(tokens, positions, positions + caches.shift, caches.layers)
        # ``commit`` takes the new state from the result. Dropping the old arrays now lets the
        # buffers be written in place when the step runs, instead of copied.
        caches.layers = None
        return VerifyResult(hidden, out if greedy else None, None if greedy else out, layers)

    def commit(self, caches: TargetCaches, result: VerifyResult, kept: int) -> None:
        """Keep the first ``kept`` positions of a verified block (none: as before the verify)."""
        layers = []
        for layer, (a, b) in zip(self.layers, result.layers):
            if layer.is_linear:
                layers.append((a[:, kept : kept + self.conv_width], b[:, kept]))
            else:
                layers.append((a, b))
        caches.layers = layers
        caches.offset += kept

    def prefill(self, caches: TargetCaches, ids: list[int], chunk: int, cancelled=lambda: False,
                images: ImageFeed | None = None):
        """Feed ``ids``; returns the hidden states of the last fed positions (1, n, D), n ≤ ``TAIL``
        (what the MTP head is primed with; the last one gives the first token), or None if cancelled.
        ``images``: ``ids`` hold image placeholders, fed as the vision tower's features at M-RoPE positions.

        Only the caches and that tail are computed: the last layer's feed-forward over the rest of a
        long chunk feeds nothing (it was 40% of a tiny model's prefill)."""
        mx = _mx()
        self.reserve(caches, caches.offset + len(ids))
        tail, step = None, chunk or len(ids)
        if images is None and SHORT_FEED < len(ids) <= SEQUENTIAL_FEED:
            # A next step's few dozen tokens (a tool's result, a short turn) as compiled pieces: 34 tokens took 36 ms
            # where one uncompiled feed of them took 54 on the demo model on a CPU.
            step = min(step, SHORT_FEED)
        for start in range(0, len(ids), step):
            if cancelled():
                return None
            part = mx.array([ids[start : start + step]], dtype=mx.int32)
            length = part.shape[1]
            positions = (mx.arange(length, dtype=mx.int32) + caches.offset)[None]
            sequential = length <= SEQUENTIAL_FEED
            if images is not None:  # the image's embeddings and positions: a graph of its own, not compiled
                hidden, _, layers = self._forward(part, positions, images.positions[:, :, start : start + length],
                                                  caches.layers, with_states=sequential, greedy=True,
                                                  capacity=caches.capacity, visible=caches.offset + length,
                                                  keep=min(TAIL, length),
                                                  embeds=images.embeds[:, start : start + length])
            elif length <= SHORT_FEED:
                hidden, _, layers = self._function(length, caches.capacity, True, True)(
                    part, positions, positions + caches.shift, caches.layers)
            else:  # prompt lengths vary: compiling each would cost more than it saves
                hidden, _, layers = self._forward(part, positions, positions + caches.shift, caches.layers,
                                                  with_states=sequential, greedy=True, capacity=caches.capacity,
                                                  visible=caches.offset + length, keep=min(TAIL, length))
            caches.layers = [
                (a[:, -self.conv_width :], b[:, -1] if sequential else b) if layer.is_linear else (a, b)
                for layer, (a, b) in zip(self.layers, layers)
            ]
            caches.offset += length
            # A whole chunk continues the tail before it; a longer one's own tail replaces it.
            whole = hidden.shape[1] == length
            tail = hidden if tail is None or not whole else mx.concatenate([tail, hidden], axis=1)[:, -TAIL:]
            mx.eval(tail, caches.layers)
        if images is not None:
            caches.shift = images.shift
        return tail


class DrafterStepper:
    """The MTP head (the weights of mlx-vlm's Qwen3_5MTPDraftModel) as compiled draft and accept steps.

    The head reads (embedding of token i+1, target hidden at i) and predicts
    token i+2. Drafting chains its own hidden state, as mlx-vlm's drafter does
    (and as the bundled demo head was trained); accepted chain entries stay in
    its cache, the rest are dropped by moving the offset back.
    """

    def __init__(self, head: MtpHead, target: TargetStepper):
        self.mtp = head
        self.target = target
        self.layers = head.layers
        attn = self.layers[0].mixer
        self.kv_heads, self.head_dim = attn.kv_heads, attn.head_dim
        self._compiled: dict[tuple, Any] = {}

    def new_caches(self, capacity: int = CAPACITY_STEP) -> DrafterCaches:
        mx = _mx()
        shape = (1, self.kv_heads, capacity, self.head_dim)
        dtype = self.target.dtype
        return DrafterCaches(0, capacity, [(mx.zeros(shape, dtype=dtype), mx.zeros(shape, dtype=dtype))
                                           for _ in self.layers])

    def reserve(self, caches: DrafterCaches, needed: int) -> None:
        if needed <= caches.capacity:
            return
        mx = _mx()
        capacity = -(-needed // CAPACITY_STEP) * CAPACITY_STEP
        pad = [(0, 0), (0, 0), (0, capacity - caches.capacity), (0, 0)]
        caches.layers = [(mx.pad(a, pad), mx.pad(b, pad)) for a, b in caches.layers]
        caches.capacity = capacity

    def _head(self, tokens, hidden, write_at, layers, capacity):
        """The head over L (token, hidden) pairs written at ``write_at``; returns (hidden out, layers)."""
        mx = _mx()
        m, body = self.mtp, self.target.body
        embed = body.embed(tokens) * body.embed_scale
        h = m.fc(mx.concatenate([m.embedding_norm(embed), m.hidden_norm(hidden)], axis=-1))
        slots = (write_at + mx.arange(tokens.shape[1], dtype=mx.int32))[None]
        mask = _attention_mask(slots, capacity)
        out_layers = []
        for layer, (a, b) in zip(self.layers, layers):
            r, a, b = _attend(layer.mixer, layer.input_norm(h), slots, slots, a, b, mask)
            out_layers.append((a, b))
            h = h + r
            h = h + layer.mlp(layer.post_norm(h))
        return m.norm(h), out_layers

    def _draft_fn(self, steps: int, capacity: int, sampling):
        key = ("draft", steps, capacity, sampling.temperature, sampling.top_p)
        fn = self._compiled.get(key)
        if fn is None:
            mx = _mx()
            def draft(seed_token, seed_hidden, write_at, layers, keys):
                tokens, probs, tok, h = [seed_token], [], seed_token, seed_hidden
                for i in range(steps):
                    h, layers = self._head(tok, h, write_at + i, layers, capacity)
                    logits = self.target.head(h)
                    if sampling.greedy:
                        tok = mx.argmax(logits, axis=-1).astype(mx.int32)
                    else:
                        p = probabilities(logits, sampling)
                        tok = mx.random.categorical(mx.log(p), axis=-1, key=keys[i]).astype(mx.int32)
                        probs.append(p)
                    tokens.append(tok)
                return mx.concatenate(tokens, axis=1), probs, layers

            fn = self._compiled[key] = mx.compile(draft)
        return fn

    def _accept_body(self, tokens, hidden, write_at, layers, capacity):
        h, layers = self._head(tokens, hidden, write_at, layers, capacity)
        last = h[:, -1:]
        return self.target.head(last), last, layers

    def _accept_fn(self, length: int, capacity: int):
        if length > SHORT_FEED:  # a prompt's length: compiling each would cost more than it saves
            return lambda *args: self._accept_body(*args, capacity)
        key = ("accept", length, capacity)
        fn = self._compiled.get(key)
        if fn is None:
            fn = self._compiled[key] = _mx().compile(lambda *args: self._accept_body(*args, capacity))
        return fn

    def draft(self, caches: DrafterCaches, block: int, sampling):
        """``block - 1`` draft tokens (1, block-1), the seed first, and their draft
        probabilities (1, block-1, V) when sampling (None when greedy)."""
        mx = _mx()
        steps = block - 2
        caches.chained = steps
        probs = [caches.seed_probs] if not sampling.greedy else []
        if steps == 0:
            tokens = caches.seed_token
        else:
            self.reserve(caches, caches.offset + steps)
            fn = self._draft_fn(steps, caches.capacity, sampling)
            keys = mx.random.split(mx.random.key(0) if sampling.greedy else _next_key(), steps)
            tokens, chained, caches.layers = fn(caches.seed_token, caches.seed_hidden,
                                                mx.array(caches.offset, dtype=mx.int32), caches.layers, keys)
            probs += chained
            caches.offset += steps
        return tokens, (mx.concatenate(probs, axis=1) if probs else None)

    def accept(self, caches: DrafterCaches, keep_chained: int, tokens, hidden, sampling) -> None:
        """After a verify: keep ``keep_chained`` of the last draft's chain entries, then
        read the true (next token, target hidden) pairs ``tokens`` (1, n), ``hidden`` (1, n, D)."""
        mx = _mx()
        caches.offset -= caches.chained - keep_chained
        caches.chained = 0
        length = tokens.shape[1]
        self.reserve(caches, caches.offset + length)
        fn = self._accept_fn(length, caches.capacity)
        logits, caches.seed_hidden, caches.layers = fn(
            tokens, hidden, mx.array(caches.offset, dtype=mx.int32), caches.layers)
        if sampling.greedy:
            caches.seed_token, caches.seed_probs = mx.argmax(logits, axis=-1).astype(mx.int32), None
        else:
            caches.seed_probs = probabilities(logits, sampling)
            caches.seed_token = sample(caches.seed_probs)
        caches.offset += length


def _next_key():
    """A fresh key from MLX's global generator, so ``mx.random.seed`` makes drafts reproducible."""
    mx = _mx()
    return mx.random.randint(0, 2**31 - 1, shape=(2,)).astype(mx.uint32)
