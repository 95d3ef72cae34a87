"""Tiny float Qwen 3.5 checkpoints in Hugging Face layout, and mlx-vlm's conversion of them.

Users' checkpoints are made from a float checkpoint as Qwen publishes it (``model.language_model.*``,
``model.visual.*``, ``mtp.*``; RMSNorm weights stored zero-centred, the MLX value minus 1;
``conv1d.weight`` as (C, 1, K); text ``model_type`` ``qwen3_5_text``; sharded safetensors with an index)
by ``mlx_vlm.convert``, which drops the MTP head unless ``--mtp`` writes it beside. This module writes
such a float checkpoint in seconds, puts it in a Hugging Face hub cache folder, and runs the real
``mlx_vlm.convert`` on it, so tests load exactly what users load.

    python -m demo_model.hf_layout OUT [--dtype bfloat16|float16] [--no-vision] [--image-processor]

``build_vision_checkpoint`` makes a converted checkpoint that can see: a small tower shaped as Qwen 3.5's
(patch 16, merge 2) and the Qwen3-VL image processor's config, with resizing bounds that make an image tens of
tokens, so one encodes in milliseconds.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from .architecture import HF, text_config
from .checkpoint_files import checkpoint_config, special_ids
from .tiny import build_tokenizer, printable_parameters

VOCAB_SIZE = 2048
# The MLX names of the norms mlx-vlm loads with +1 (zero-centred in the Hugging Face layout): the
# body's (as models/qwen3_5 lists them) and the MTP head's (as its drafter's sanitize lists them).
BODY_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight",
              ".q_norm.weight", ".k_norm.weight")
MTP_NORMS = ("norm.weight", "pre_fc_norm_embedding.weight", "pre_fc_norm_hidden.weight")
# Qwen 3.5's vision tower patches (16 pixels, 2×2 merged), at toy width; the rest comes from checkpoint_config.
VISION_SHAPE = {"patch_size": 16, "spatial_patch_size": 16, "num_position_embeddings": 64}
# preprocessor_config.json as Qwen publishes it for Qwen 3.5, but for its bounds: from 4 to 64 image tokens
# (one token per 32×32 pixels) instead of 64 to 16,384.
PREPROCESSOR_CONFIG = {
    "size": {"shortest_edge": 4 * 32 * 32, "longest_edge": 64 * 32 * 32},
    "patch_size": 16,
    "temporal_patch_size": 2,
    "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor",
    "image_processor_type": "Qwen2VLImageProcessorFast",
}
README = """---
license: apache-2.0
pipeline_tag: image-text-to-text
library_name: transformers
---

A tiny random-weight Qwen 3.5 checkpoint in Hugging Face layout, for tests.
"""


def hf_config(mlx_config: dict, dtype: str) -> dict:
    """config.json as Qwen publishes it for the model ``mlx_config`` describes (the vision config stays
    without the tower's weights too: mlx-vlm then leaves the tower out)."""
    text = dict(mlx_config["text_config"], model_type="qwen3_5_text", dtype=dtype)
    rope = dict(text.pop("rope_parameters"))
    rope["rope_type"] = rope.pop("type")
    text["rope_parameters"] = rope | {"mrope_interleaved": True}
    return dict(mlx_config, text_config=text)


def hf_name(key: str) -> str:
    """The Hugging Face name of an MLX parameter name."""
    if key.startswith("language_model.model."):
        return "model.language_model." + key.removeprefix("language_model.model.")
    if key.startswith("language_model.lm_head"):
        return key.removeprefix("language_model.")
    if key.startswith("vision_tower."):
        return "model.visual." + key.removeprefix("vision_tower.")
    return key


def hf_weights(weights: dict, vision: bool) -> dict:
    """MLX-layout ``weights`` (as mlx-vlm's modules hold them) rewritten to the Hugging Face layout."""
    out = {}
    for key, value in weights.items():
        if key.startswith("vision_tower.") and not vision:
            continue
        if value.ndim == 1 and (
            key.startswith("language_model.") and key.endswith(BODY_NORMS)
            or key.startswith("mtp.") and key.endswith(MTP_NORMS)
        ):
            value = value - 1.0
        if key.endswith("conv1d.weight"):
            value = value.swapaxes(1, 2)  # MLX (C, K, 1) -> PyTorch (C, 1, K)
        if key.endswith("patch_embed.proj.weight"):
            value = value.transpose(0, 4, 1, 2, 3)  # MLX NDHWC -> PyTorch NCDHW
        out[hf_name(key)] = value
    return out


def shard_plan(keys: list[str], shards: int) -> dict[str, str]:
    """weight_map: the body spread over ``shards - 1`` files, the MTP head (and the final norm, as
    in Qwen's own files, where the head sits in the last shard beside other tensors) in the last."""
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    body = sorted(k for k in keys if not k.startswith("mtp.") and k != "model.language_model.norm.weight")
    plan = {k: names[min(i * (shards - 1) // len(body), shards - 2)] for i, k in enumerate(body)}
    return plan | {k: names[-1] for k in keys if k not in plan}


def mlx_parameters(folder: Path, seed: int = 0, image_processor: bool = False) -> tuple[dict, dict]:
    """(config, parameters) in MLX layout, as mlx-vlm's modules hold them, for the tokenizer in ``folder``:
    what build_hf_checkpoint writes, before it rewrites them to the Hugging Face layout (``image_processor``:
    with the tower shaped for Qwen3-VL's image processor)."""
    from tokenizers import Tokenizer

    ids = special_ids(Tokenizer.from_file(str(folder / "tokenizer.json")))
    config = checkpoint_config(ids, text_config(ids["vocab_size"], HF))
    if image_processor:
        config["vision_config"] = config["vision_config"] | VISION_SHAPE
    return config, printable_parameters(config, seed, folder)


def build_hf_checkpoint(out: str | Path, *, dtype: str = "bfloat16", vision: bool = True, shards: int = 3,
                        seed: int = 0, image_processor: bool = False) -> Path:
    """Write a float Qwen 3.5 checkpoint in Hugging Face layout to the new folder ``out``; return it.

    ``shards`` >= 2: the MTP head is in the last one, which the index names. ``image_processor``: with
    ``preprocessor_config.json`` and a tower shaped for it (else the tower cannot take an image)."""
    import mlx.core as mx

    if shards < 2:
        raise ValueError("shards must be at least 2: the MTP head has a shard of its own")
    out = Path(out)
    out.mkdir(parents=True)
    build_tokenizer(out, VOCAB_SIZE)
    mlx_config, weights = mlx_parameters(out, seed, image_processor)
    cast = getattr(mx, dtype)
    tensors = {k: v.astype(cast) for k, v in hf_weights(weights, vision).items()}
    plan = shard_plan(list(tensors), shards)
    for name in sorted(set(plan.values())):
        mx.save_safetensors(str(out / name), {k: v for k, v in tensors.items() if plan[k] == name},
                            metadata={"format": "pt"})
    size = sum(v.nbytes for v in tensors.values())
    index = {"metadata": {"total_size": size}, "weight_map": dict(sorted(plan.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (out / "config.json").write_text(json.dumps(hf_config(mlx_config, dtype), indent=2))
    (out / "generation_config.json").write_text(
        json.dumps({"eos_token_id": mlx_config["eos_token_id"], "do_sample": False}))
    (out / "README.md").write_text(README)
    if image_processor:
        (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2))
    return out


def build_vision_checkpoint(out: str | Path, *, bits: int | None = 4, vision: bool = True, seed: int = 0) -> Path:
    """A tiny Qwen 3.5 that can see, as users get it: the Hugging Face checkpoint (vision tower,
    ``preprocessor_config.json``, MTP head) converted by ``mlx_vlm.convert --mtp`` (``bits`` as ``-q --q-bits``,
    None for float) into the new folder ``out``, the head beside it (``out``-mtp). ``vision=False``: the same
    conversion of a checkpoint with its tower stripped. Returns ``out``."""
    out = Path(out)
    source = build_hf_checkpoint(out.with_name(f"{out.name}-hf"), vision=vision, seed=seed, image_processor=True)
    return convert(source, out, bits=bits, mtp=True)


def mtp_shards(folder: Path) -> list[str]:
    """The files of ``folder``'s index that hold ``mtp.*`` tensors."""
    weight_map = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    return sorted({file for key, file in weight_map.items() if key.startswith("mtp.")})


def add_to_hub_cache(folder: Path, cache: Path, repo_id: str, revision: str = "0" * 40) -> Path:
    """Lay ``folder``'s files out as the hub cache holds a download of ``repo_id``: content-named blobs,
    ``refs/main`` naming the snapshot, the snapshot's files linked to the blobs. Returns the snapshot."""
    repo = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for file in sorted(p for p in folder.iterdir() if p.is_file()):
        data = file.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.name
        link.unlink(missing_ok=True)
        link.symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def convert(source: str | Path, out: str | Path, *, bits: int | None = 4, group_size: int = 64,
            mtp: bool = False, quant_predicate: str | None = None, dtype: str | None = None,
            hub_cache: Path | None = None) -> Path:
    """Run ``python -m mlx_vlm.convert`` on ``source`` (a folder, or a repo id found in ``hub_cache``,
    offline), quantized to ``bits`` in groups of ``group_size``, or by the mixed recipe ``quant_predicate``
    (``mixed_4_6``, …), or kept float (neither); return ``out``.
    A repo id gets the model card mlx-vlm writes for hub conversions, with ``base_model`` set."""
    command = [sys.executable, "-m", "mlx_vlm.convert", "--hf-path", str(source), "--mlx-path", str(out)]
    if bits is not None:
        command += ["-q", "--q-bits", str(bits), "--q-group-size", str(group_size)]
    if quant_predicate:  # a mixed recipe picks its own bits and groups
        command += ["--quant-predicate", quant_predicate, *([] if bits is not None else ["-q"])]
    if dtype:
        command += ["--dtype", dtype]
    if mtp:
        command.append("--mtp")
    env = dict(os.environ)
    if hub_cache is not None:
        env |= {"HF_HUB_CACHE": str(hub_cache), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"mlx_vlm.convert exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return Path(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="new folder to write the checkpoint to")
    parser.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    parser.add_argument("--no-vision", action="store_true", help="leave out the vision tower's weights")
    parser.add_argument("--image-processor", action="store_true",
                        help="write preprocessor_config.json and a tower shaped for it")
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(build_hf_checkpoint(args.output, dtype=args.dtype, vision=not args.no_vision, shards=args.shards,
                              seed=args.seed, image_processor=args.image_processor))


if __name__ == "__main__":
    main()
