"""The demo model's shape: deep and narrow, so a one-layer MTP head is cheap next to the body.

On a 2-core CPU decode cost is dominated by per-layer work, not matrix size, so
more layers of a narrow width make each draft relatively cheaper; float32 keeps
the checkpoint under 30 MB at this size and lets a fast BLAS do the matmuls.
"""

from __future__ import annotations

# The demo model's trained context: its longest training conversations, and what its config declares, so
# that specchat's context guard drops old turns before the model reaches lengths it never saw.
DEMO_CONTEXT = 4096


def text_config(vocab_size: int, **shape) -> dict:
    """The demo model's text config; ``shape`` overrides sizes (the tiny test checkpoint uses it)."""
    return {
        "model_type": "qwen3_5",
        "hidden_size": 192,
        "intermediate_size": 512,
        "num_hidden_layers": 16,
        # Three gated-delta (linear attention) layers to one full-attention layer, as in Qwen 3.5.
        "full_attention_interval": 4,
        "num_attention_heads": 3,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab_size,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
        # mrope_section sums to head_dim * partial_rotary_factor / 2.
        "rope_parameters": {
            "type": "default",
            "mrope_section": [4, 2, 2],
            "rope_theta": 100000,
            "partial_rotary_factor": 0.25,
        },
        "mtp_num_hidden_layers": 1,
    } | shape
