"""What a folder holds, for loading and the engine picker alike: whether it is a checkpoint (``config.json``
and ``*.safetensors``), its tensors' names, whether it carries an MTP head, and the checkpoints in the
Hugging Face cache and in a models folder. Nothing here imports MLX or reads a tensor."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

INDEX = "model.safetensors.index.json"
MODELS_DIR_DEPTH = 2  # models/NAME and models/ORG/NAME


@dataclass(frozen=True)
class Listed:
    """A checkpoint found in the hub cache (named by its hub id) or a models folder (by its relative path)."""

    name: str
    path: Path
    size_bytes: int


def read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def is_checkpoint(path: Path) -> bool:
    return (path / "config.json").is_file() and any(path.glob("*.safetensors"))


def size_bytes(path: Path) -> int:
    """The folder's files; a hub snapshot's links are followed to their blobs, each counted once."""
    seen, total = set(), 0
    for file in path.iterdir():
        try:
            real = file.resolve()
            if real not in seen and real.is_file():
                seen.add(real)
                total += real.stat().st_size
        except OSError:
            continue
    return total


def tensor_names(folder: Path) -> list[str] | None:
    """Tensor names from the index, else from the files' headers (no tensor is read); None when unreadable."""
    from safetensors import SafetensorError, safe_open

    index = folder / INDEX
    if index.is_file():
        weight_map = (read_json(index) or {}).get("weight_map")
        return list(weight_map) if isinstance(weight_map, dict) else None
    names = []
    for file in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(file), framework="numpy") as f:
                names += f.keys()
        except (OSError, SafetensorError):
            return None
    return names


def has_bundled_mtp(path: Path) -> bool:
    """Whether the checkpoint carries a native MTP head: ``mtp.*`` tensors. A config that declares MTP layers
    over weights without them (converted checkpoints often drop the head) does not count, nor do weights
    that cannot be read: there would be nothing to draft with."""
    return any(name.startswith("mtp.") for name in tensor_names(path) or [])


def head_shards(folder: Path) -> list[str]:
    """The files of the index that hold ``mtp.*`` tensors (``[]``: none, or no index)."""
    weight_map = (read_json(folder / INDEX) or {}).get("weight_map") or {}
    return sorted({file for key, file in weight_map.items() if key.startswith("mtp.")})


def hf_hub_cache() -> Path:
    """Where huggingface_hub keeps downloads: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(os.environ.get("HF_HOME") or cache / "huggingface").expanduser() / "hub"


def hub_repo_of(path: Path) -> str | None:
    """``ORG/NAME`` when ``path`` is a snapshot in a hub cache (``models--ORG--NAME/snapshots/REV``)."""
    repo = path.parent.parent
    if path.parent.name == "snapshots" and repo.name.startswith("models--"):
        return repo.name.removeprefix("models--").replace("--", "/")
    return None


def cached_file(repo_id: str, filename: str) -> Path | None:
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, filename, cache_dir=hf_hub_cache())
    return Path(found) if isinstance(found, str) else None


def hub_checkpoints(cache: Path) -> list[Listed]:
    """One per cached model repository that holds a checkpoint (as huggingface_hub's scan of the cache finds
    them): the snapshot ``refs/main`` names, else the newest."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        scan = scan_cache_dir(cache)
    except (CacheNotFound, ValueError):  # no cache yet, or a file where it should be
        return []
    found = []
    for repo in sorted(scan.repos, key=lambda r: r.repo_path.name):
        if repo.repo_type != "model":
            continue
        revisions = sorted(repo.revisions, key=lambda r: ("main" not in r.refs, -r.last_modified))
        revision = next((r for r in revisions if is_checkpoint(r.snapshot_path)), None)
        if revision is not None:  # the path under the cache as given, not the scan's resolved one
            path = cache / revision.snapshot_path.relative_to(scan.cache_dir)
            found.append(Listed(repo.repo_id, path, size_bytes(path)))
    return found


def models_dir_checkpoints(root: Path) -> list[Listed]:
    """The checkpoints in ``root/NAME`` and ``root/ORG/NAME``, named by that relative path."""
    found = []

    def walk(folder: Path, depth: int) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            if is_checkpoint(child):
                found.append(Listed(child.relative_to(root).as_posix(), child, size_bytes(child)))
            elif depth > 1:
                walk(child, depth - 1)

    walk(root, MODELS_DIR_DEPTH)
    return found
