"""The shapes of the models made here, and the text config of each.

The demo model's: deep and narrow, so a one-layer MTP head is cheap next to the body.

On a 2-core CPU decode cost is dominated by per-layer work, not matrix size, so
more layers of a narrow width make each draft relatively cheaper; float32 keeps
the checkpoint under 30 MB at this size and lets a fast BLAS do the matmuls.
"""

from __future__ import annotations

from dataclasses import dataclass

# The demo model's trained context: its longest training conversations, and what its config declares, so
# that specchat's context guard drops old turns before the model reaches lengths it never saw.
DEMO_CONTEXT = 4096


@dataclass(frozen=True)
class TextShape:
    """The sizes of a Qwen 3.5 text model made here: the demo model's (the defaults), the test checkpoints' and
    the rigs'."""

    hidden: int = 192
    intermediate: int = 512
    layers: int = 16
    attention_every: int = 4  # three gated-delta (linear attention) layers to one full-attention layer
    heads: int = 3
    kv_heads: int = 1
    head_dim: int = 64
    linear_key_heads: int = 2
    linear_value_heads: int = 4
    linear_head_dim: int = 32  # key and value heads alike
    tied: bool = True  # the LM head is the embedding


DEMO = TextShape()
# The demo model's layer types at toy sizes, built and run in well under a second. mlx-vlm's gated-delta Metal
# kernel assumes a key head dim divisible by 32 (and a value head dim by 8), so the suite runs the Metal branches
# on a Mac as it runs the CPU's here.
TINY = TextShape(hidden=64, intermediate=128, layers=4, attention_every=2, heads=4, kv_heads=2)
# The Hugging Face layout's test checkpoints: also quantizable with groups of 32, 64 or 128.
HF = TextShape(hidden=128, intermediate=256, layers=4, attention_every=2, heads=2, kv_heads=1)


def rig_shape(hidden: int, layers: int, intermediate: int) -> TextShape:
    """Qwen 3.5's layer pattern at a rig's size: query heads of 128 (64 below hidden 1024), a quarter as many
    key-value heads, gated-delta heads of the same size, an untied LM head."""
    head_dim = 128 if hidden >= 1024 else 64
    heads = max(1, hidden // head_dim)
    linear_heads = max(1, hidden // 256)
    return TextShape(hidden=hidden, intermediate=intermediate, layers=layers, heads=heads,
                     kv_heads=max(1, heads // 4), head_dim=head_dim, linear_key_heads=linear_heads,
                     linear_value_heads=2 * linear_heads, linear_head_dim=head_dim, tied=False)


def text_config(vocab_size: int, shape: TextShape = DEMO, **extra) -> dict:
    """The text config of a model of ``shape``; ``extra`` sets more keys (the trained context, the dtype)."""
    return {
        "model_type": "qwen3_5",
        "hidden_size": shape.hidden,
        "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers,
        "full_attention_interval": shape.attention_every,
        "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads,
        "head_dim": shape.head_dim,
        "linear_num_value_heads": shape.linear_value_heads,
        "linear_num_key_heads": shape.linear_key_heads,
        "linear_key_head_dim": shape.linear_head_dim,
        "linear_value_head_dim": shape.linear_head_dim,
        "linear_conv_kernel_dim": 4,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": shape.tied,
        # mrope_section sums to head_dim * partial_rotary_factor / 2.
        "rope_parameters": {
            "type": "default",
            "mrope_section": [shape.head_dim // 16, shape.head_dim // 32, shape.head_dim // 32],
            "rope_theta": 100000,
            "partial_rotary_factor": 0.25,
        },
        "mtp_num_hidden_layers": 1,
    } | extra
