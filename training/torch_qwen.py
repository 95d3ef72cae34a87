"""mlx-vlm's qwen3_5 text model and Qwen 3.5 MTP head, in PyTorch, for training.

Parameter names and shapes are exactly mlx-vlm's (``language_model.model.*``
and ``mtp.*``, the depthwise conv stored as MLX's ``(channels, kernel, 1)``),
so the trained state dict is the MLX checkpoint's weights as they are. The
maths follows mlx-vlm 0.7.10 (models/qwen3_5/language.py, gated_delta.py and
speculative/drafters/qwen3_5_mtp); ``training.export`` checks the logits
against mlx-vlm itself.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight if weight is not None else y).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class Attention(nn.Module):
    """Gated full attention: q_proj gives a query and an output gate per head."""

    def __init__(self, c: dict):
        super().__init__()
        h, self.nh, self.nkv, self.hd = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.q_proj = nn.Linear(h, self.nh * self.hd * 2, bias=False)
        self.k_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, self.nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.nh * self.hd, h, bias=False)
        self.q_norm = RMSNorm(self.hd, c["rms_norm_eps"])
        self.k_norm = RMSNorm(self.hd, c["rms_norm_eps"])
        rope = c["rope_parameters"]
        self.rot = int(self.hd * rope["partial_rotary_factor"])
        inv = 1.0 / (rope["rope_theta"] ** (torch.arange(0, self.rot, 2, dtype=torch.float32) / self.rot))
        self.register_buffer("inv_freq", inv, persistent=False)

    def project(self, x, positions):
        """Rotated queries, keys, values ([B, heads, L, hd]) and the output gate, at ``positions``."""
        B, L, _ = x.shape
        q, gate = self.q_proj(x).view(B, L, self.nh, 2 * self.hd).chunk(2, dim=-1)
        gate = gate.reshape(B, L, -1)
        q = self.q_norm(q).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, L, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).view(B, L, self.nkv, self.hd).transpose(1, 2)
        freqs = positions.float()[:, None] * self.inv_freq
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        q = torch.cat([q[..., : self.rot] * cos + rotate_half(q[..., : self.rot]) * sin, q[..., self.rot :]], -1)
        k = torch.cat([k[..., : self.rot] * cos + rotate_half(k[..., : self.rot]) * sin, k[..., self.rot :]], -1)
        return q, k, v, gate

    def attend(self, q, k, v, gate, mask=None):
        B, _, L, _ = q.shape
        if mask is not None:
            # A masked call must reach the memory-efficient kernel, which takes no grouped heads: without it
            # (and with cuDNN's attention off, see train.py) PyTorch falls back to materialising the scores.
            k, v = (t.repeat_interleave(self.nh // self.nkv, dim=1) for t in (k, v))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.hd**-0.5, enable_gqa=mask is None
        )
        return self.o_proj(out.transpose(1, 2).reshape(B, L, -1) * torch.sigmoid(gate))

    def forward(self, x):
        return self.attend(*self.project(x, torch.arange(x.shape[1], device=x.device)))


class ConvWeight(nn.Module):
    """Holds a depthwise conv weight in MLX's (channels, kernel, 1) layout."""

    def __init__(self, channels: int, kernel: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(channels, kernel, 1).uniform_(-1, 1) / math.sqrt(kernel))


def _chunk_terms(q, k, v, g, beta, C: int):
    """Per-chunk terms of the chunked scan, each chunk on its own (no state yet).

    Returns the output's within-chunk part MU0 and its state reader Qeff, and each chunk's state update as an
    affine map S -> S @ P + Q (S is [.., Dv, Dk]). Inputs are float32, padded to whole chunks, [B, H, n, C, D].
    """
    lcg = torch.cumsum(torch.log(g.clamp(1e-6, 1.0)), dim=-1)
    cumg = lcg.exp()
    lower_incl = torch.tril(torch.ones(C, C, device=q.device))
    strict_lower = torch.tril(torch.ones(C, C, device=q.device), -1)
    diff = torch.where(lower_incl > 0, lcg[..., :, None] - lcg[..., None, :], torch.full_like(lower_incl, -1e30))
    dr = diff.exp()
    A = beta[..., :, None] * dr * (k @ k.transpose(-1, -2)) * strict_lower
    eye = torch.eye(C, device=q.device)
    Tinv = torch.linalg.solve_triangular(eye + A, eye.expand_as(A), upper=False, unitriangular=True)
    U0 = Tinv @ (beta[..., :, None] * v)
    Kt = Tinv @ ((beta * cumg)[..., :, None] * k)
    M = dr * (q @ k.transpose(-1, -2)) * lower_incl
    Qeff = cumg[..., :, None] * q - M @ Kt
    MU0 = M @ U0
    # Chunk c takes S to cumg_last * S + ((ratio * (U0 - Kt @ S^T))^T @ k), which is affine in S.
    rk = (lcg[..., -1, None] - lcg).exp()[..., None] * k
    P = cumg[..., -1, None, None] * torch.eye(k.shape[-1], device=q.device) - Kt.transpose(-1, -2) @ rk
    Q = U0.transpose(-1, -2) @ rk
    return MU0, Qeff, P, Q


def gated_delta_chunked(q, k, v, g, beta, C: int = 64):
    """The gated delta rule over a whole sequence from a zero state (mlx-vlm's chunked scan).

    q, k: [B, T, H, Dk]; v: [B, T, H, Dv]; g, beta: [B, T, H]. Returns y: [B, T, H, Dv].
    The chunks' state updates are composed by a parallel prefix scan (log2 of the chunk count rounds of
    batched products) rather than one chunk after another: the same maths, far fewer kernel launches.
    """
    B, T, H, Dk = q.shape
    Dv = v.shape[-1]
    pad = (C - T % C) % C
    if pad:
        q, k, v = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (q, k, v))
        g = F.pad(g, (0, 0, 0, pad), value=1.0)
        beta = F.pad(beta, (0, 0, 0, pad))
    n = (T + pad) // C

    def rc(x, D):
        return x.reshape(B, n, C, H, D).permute(0, 3, 1, 2, 4).float()

    g = g.reshape(B, n, C, H).permute(0, 3, 1, 2).float()
    beta = beta.reshape(B, n, C, H).permute(0, 3, 1, 2).float()
    MU0, Qeff, P, Q = _chunk_terms(rc(q, Dk), rc(k, Dk), rc(v, Dv), g, beta, C)
    # Inclusive scan: after it, Q[c] is the state after chunk c (from a zero state).
    step = 1
    while step < n:
        P, Q = (
            torch.cat([P[:, :, :step], P[:, :, :-step] @ P[:, :, step:]], dim=2),
            torch.cat([Q[:, :, :step], Q[:, :, :-step] @ P[:, :, step:] + Q[:, :, step:]], dim=2),
        )
        step *= 2
    before = torch.cat([torch.zeros_like(Q[:, :, :1]), Q[:, :, :-1]], dim=2)
    y = MU0 + Qeff @ before.transpose(-1, -2)
    return y.permute(0, 2, 3, 1, 4).reshape(B, T + pad, H, Dv)[:, :T]


class GatedDeltaNet(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        h = c["hidden_size"]
        self.nv, self.nk = c["linear_num_value_heads"], c["linear_num_key_heads"]
        self.dk, self.dv = c["linear_key_head_dim"], c["linear_value_head_dim"]
        self.key_dim, self.value_dim = self.dk * self.nk, self.dv * self.nv
        self.kernel = c["linear_conv_kernel_dim"]
        self.conv_dim = 2 * self.key_dim + self.value_dim
        self.conv1d = ConvWeight(self.conv_dim, self.kernel)
        self.in_proj_qkv = nn.Linear(h, self.conv_dim, bias=False)
        self.in_proj_z = nn.Linear(h, self.value_dim, bias=False)
        self.in_proj_b = nn.Linear(h, self.nv, bias=False)
        self.in_proj_a = nn.Linear(h, self.nv, bias=False)
        self.dt_bias = nn.Parameter(torch.ones(self.nv))
        self.A_log = nn.Parameter(torch.empty(self.nv).uniform_(1, 16).log())
        self.norm = RMSNorm(self.dv, c["rms_norm_eps"])
        self.out_proj = nn.Linear(self.value_dim, h, bias=False)

    def forward(self, x):
        B, S, _ = x.shape
        qkv = self.in_proj_qkv(x)
        z = self.in_proj_z(x).view(B, S, self.nv, self.dv)
        b, a = self.in_proj_b(x), self.in_proj_a(x)
        # Causal depthwise conv from a zero state: pad kernel-1 steps on the left.
        w = self.conv1d.weight.permute(0, 2, 1)  # (C, 1, K): torch's layout, same cross-correlation
        conv = F.conv1d(F.pad(qkv.transpose(1, 2), (self.kernel - 1, 0)), w, groups=self.conv_dim)
        conv = F.silu(conv.transpose(1, 2))
        q, k, v = torch.split(conv, [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.reshape(B, S, self.nk, self.dk)
        k = k.reshape(B, S, self.nk, self.dk)
        v = v.reshape(B, S, self.nv, self.dv)
        eps = 1e-6 / self.dk
        q = (self.dk**-1.0) * rms_norm(q, None, eps)
        k = (self.dk**-0.5) * rms_norm(k, None, eps)
        g = torch.exp(-torch.exp(self.A_log.float()) * F.softplus(a.float() + self.dt_bias))
        beta = torch.sigmoid(b.float())
        rep = self.nv // self.nk
        if rep > 1:
            q = q.repeat_interleave(rep, dim=2)
            k = k.repeat_interleave(rep, dim=2)
        # The scan's cumulative decays and triangular solve need float32, also under autocast.
        with torch.autocast(device_type=x.device.type, enabled=False):
            y = gated_delta_chunked(q.float(), k.float(), v.float(), g, beta).to(x.dtype)
        normed = rms_norm(y, self.norm.weight, self.norm.eps)
        y = (F.silu(z.float()) * normed.float()).to(x.dtype)
        return self.out_proj(y.reshape(B, S, -1))


class MLP(nn.Module):
    def __init__(self, h: int, inter: int):
        super().__init__()
        self.gate_proj = nn.Linear(h, inter, bias=False)
        self.up_proj = nn.Linear(h, inter, bias=False)
        self.down_proj = nn.Linear(inter, h, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: dict, linear: bool):
        super().__init__()
        self.is_linear = linear
        if linear:
            self.linear_attn = GatedDeltaNet(c)
        else:
            self.self_attn = Attention(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        mixer = self.linear_attn if self.is_linear else self.self_attn
        h = x + mixer(self.input_layernorm(x))
        return h + self.mlp(self.post_attention_layernorm(h))


class Body(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        every = c["full_attention_interval"]
        self.layers = nn.ModuleList(DecoderLayer(c, (i + 1) % every != 0) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, ids):
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)


class LanguageModel(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.model = Body(c)


class MTP(nn.Module):
    """One full-attention layer over [norm(embed(next token)), norm(hidden)]; predicts a token further.

    mlx-vlm drafts a block by feeding the head its own output as the next step's
    hidden, so ``chain`` trains those recursive steps too, attending as at
    inference: to the head's cache of true-hidden entries up to the chain's start
    and to the chain's own earlier steps.
    """

    def __init__(self, c: dict):
        super().__init__()
        h = c["hidden_size"]
        self.fc = nn.Linear(2 * h, h, bias=False)
        self.pre_fc_norm_embedding = RMSNorm(h, c["rms_norm_eps"])
        self.pre_fc_norm_hidden = RMSNorm(h, c["rms_norm_eps"])
        self.layers = nn.ModuleList([DecoderLayer(c, linear=False)])
        self.norm = RMSNorm(h, c["rms_norm_eps"])

    def chain(self, embeds, hidden, steps: int) -> list[torch.Tensor]:
        """Head outputs for ``steps`` recursive steps over a sequence of length T.

        Step j (from 1) at chain start t reads token t+j and predicts token t+j+1;
        its output has length T-j. ``embeds`` and ``hidden`` are the body's, [B, T, H].
        """
        T = embeds.shape[1]
        device = embeds.device
        outputs, kv = [], [[] for _ in self.layers]  # kv[layer][step-1] = (k, v)
        h_prev = hidden
        for j in range(1, steps + 1):
            n = T - j
            x = self.fc(torch.cat([self.pre_fc_norm_embedding(embeds[:, j:]), self.pre_fc_norm_hidden(h_prev[:, :n])], -1))
            positions = torch.arange(n, device=device) + (j - 1)
            mask = None
            if j > 1:
                rows = torch.arange(n, device=device)[:, None]
                blocks = [rows >= torch.arange(T - 1, device=device)[None, :]]  # first-step cache up to t
                blocks += [torch.eye(n, T - i, device=device, dtype=torch.bool) for i in range(2, j + 1)]
                mask = torch.cat(blocks, dim=1)
            for layer, store in zip(self.layers, kv):
                attn = layer.self_attn
                q, k, v, gate = attn.project(layer.input_layernorm(x), positions)
                store.append((k, v))
                keys = torch.cat([kk for kk, _ in store], dim=2)
                values = torch.cat([vv for _, vv in store], dim=2)
                x = x + attn.attend(q, keys, values, gate, mask)
                x = x + layer.mlp(layer.post_attention_layernorm(x))
            h_prev = self.norm(x)
            outputs.append(h_prev)
        return outputs


class Qwen35WithMTP(nn.Module):
    def __init__(self, text_config: dict):
        super().__init__()
        self.language_model = LanguageModel(text_config)
        self.mtp = MTP(text_config)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def logits(self, hidden):
        return hidden @ self.language_model.model.embed_tokens.weight.T  # tied lm_head

    def forward(self, ids, mtp_steps: int = 1):
        """Main logits [B, T, V], and per MTP step j logits [B, T-j, V] (j+1 tokens ahead)."""
        hidden = self.language_model.model(ids)
        embeds = self.language_model.model.embed_tokens(ids)
        mtp = self.mtp.chain(embeds, hidden, mtp_steps)
        return self.logits(hidden), [self.logits(h) for h in mtp]
