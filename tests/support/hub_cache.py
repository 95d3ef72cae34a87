"""Checkpoints laid out as users have them: a folder of config and safetensors shards, and a Hugging Face hub
cache as huggingface_hub writes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

HF_BASE = "tinyorg/Tiny-Qwen3.5"  # the hub id the hf_base fixture's checkpoint is cached under


def write_checkpoint(folder: Path, tensors: list[str], config: dict | None = None, shards: int = 1) -> None:
    """A checkpoint folder: config.json and ``shards`` safetensors files (with an index when sharded)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config or {"model_type": "qwen3_5"}))
    weight_map = {}
    for shard in range(shards):
        name = "model.safetensors" if shards == 1 else f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        mine = tensors[shard::shards]
        save_file({t: np.zeros((4, 4), np.float32) for t in mine}, str(folder / name))
        weight_map.update({t: name for t in mine})
    if shards > 1:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def hub_repo(cache: Path, repo_id: str, tensors: list[str], config: dict | None = None, shards: int = 1,
             revision: str = "abc123") -> Path:
    """``repo_id`` as huggingface_hub caches it: files in blobs/, the snapshot links to them, refs/main names it."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    staged = repo / "staged"
    write_checkpoint(staged, tensors, config, shards)
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for file in staged.iterdir():
        blob = repo / "blobs" / f"blob-{file.name}"
        file.rename(blob)
        (snapshot / file.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    staged.rmdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def blob_bytes(repo: Path) -> int:
    return sum(f.stat().st_size for f in (repo / "blobs").iterdir())


WEIGHTS = ["model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight"]
MTP = ["mtp.fc.weight", "mtp.layers.0.mlp.up_proj.weight"]

