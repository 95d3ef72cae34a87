"""What every checkpoint this project makes shares: Qwen's special tokens, the tokenizer files, config.json."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
]


def bpe_trainer(vocab_size: int):
    """A byte-level BPE trainer that keeps Qwen's special tokens whole."""
    from tokenizers import pre_tokenizers, trainers

    return trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )


def special_ids(tok) -> dict[str, int]:
    """The special tokens' ids in a ``tokenizers.Tokenizer``, and its vocabulary size."""
    ids = {t: tok.token_to_id(t) for t in SPECIAL_TOKENS}
    ids["vocab_size"] = tok.get_vocab_size()
    return ids


def save_tokenizer(tok, out: Path) -> dict[str, int]:
    """Write tokenizer.json, tokenizer_config.json and the chat template; return ``special_ids``."""
    tok.save(str(out / "tokenizer.json"))
    template = (HERE / "chat_template.jinja").read_text()
    (out / "chat_template.jinja").write_text(template)
    (out / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "Qwen2Tokenizer",
                "model_max_length": 32768,
                "eos_token": "<|im_end|>",
                "pad_token": "<|endoftext|>",
                "bos_token": None,
                "unk_token": None,
                "add_prefix_space": False,
                "chat_template": template,
            },
            indent=2,
        )
    )
    return special_ids(tok)


def checkpoint_config(ids: dict[str, int], text_config: dict) -> dict:
    """config.json for a qwen3_5 checkpoint whose tokenizer has these special-token ids."""
    return {
        "model_type": "qwen3_5",
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "text_config": text_config,
        # The vision tower is unused by a text chat, but its defaults are full size.
        "vision_config": {
            "model_type": "qwen3_5",
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "out_hidden_size": text_config["hidden_size"],
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 64,
            "in_channels": 3,
        },
        "vocab_size": ids["vocab_size"],
        # Without a top-level eos the qwen3_5 config appends the real Qwen id.
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": True,
    }


# Every file a checkpoint made here holds; a folder with anything else is not one of ours to replace.
MADE_FILES = frozenset({"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                        "tokenizer_config.json", "chat_template.jinja", "preprocessor_config.json"})


def fresh_folder(out: str | Path, keep: tuple[str, ...] = ()) -> Path:
    """``out`` as a folder to write a checkpoint into: a checkpoint made here loses its files (but those named
    in ``keep``); a folder holding anything else is refused (ValueError), so a mistyped path wipes nothing."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file, not a folder: pass a new or empty folder for the checkpoint")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir()
                         if not p.is_file() or p.name not in MADE_FILES | set(keep))
        if foreign:
            raise ValueError(f"{out} is not a checkpoint made here (it holds {', '.join(foreign[:5])}), so it is "
                             "left alone: pass a new or empty folder, or that checkpoint's own folder")
        for name in MADE_FILES:
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    return out


def random_parameters(config: dict, seed: int) -> dict:
    """mlx-vlm's own freshly initialised parameters for ``config``: the body's, and the MTP head's under
    ``mtp.*`` (the key layout of a native checkpoint). MLX arrays are lazy: nothing is computed until saved."""
    import importlib

    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.speculative.drafters.qwen3_5_mtp.config import Qwen3_5MTPConfig
    from mlx_vlm.speculative.drafters.qwen3_5_mtp.qwen3_5_mtp import Qwen3_5MTPDraftModel

    family = importlib.import_module(f"mlx_vlm.models.{config['model_type']}")  # qwen3_5 or qwen3_5_moe
    mx.random.seed(seed)
    weights = dict(tree_flatten(family.Model(family.ModelConfig.from_dict(config)).parameters()))
    mtp = Qwen3_5MTPDraftModel(Qwen3_5MTPConfig.from_dict(config))
    weights.update({f"mtp.{k}": v for k, v in tree_flatten(mtp.parameters())})
    return weights


def save_checkpoint(out: Path, config: dict, weights: dict) -> None:
    """Write model.safetensors (MLX layout), config.json and generation_config.json into ``out``."""
    import mlx.core as mx

    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"eos_token_id": config["eos_token_id"], "do_sample": False})
    )
