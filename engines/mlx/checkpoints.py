"""What a folder holds, for loading and the engine picker alike: whether it is a checkpoint (``config.json``
and ``*.safetensors``), its tensors' names, whether it carries an MTP head, and the checkpoints in the
Hugging Face cache and in a models folder. Nothing here imports MLX or reads a tensor."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from pathlib import Path

INDEX = "model.safetensors.index.json"
MAX_HEADER = 64 << 20  # a safetensors header is JSON; far larger means a damaged file
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
    """Tensor names from the index, else from the files' headers (nothing is loaded); None when unreadable."""
    index = folder / INDEX
    try:
        if index.is_file():
            return list(json.loads(index.read_text()).get("weight_map", {}))
        names = []
        for file in folder.glob("*.safetensors"):
            with file.open("rb") as f:
                (length,) = struct.unpack("<Q", f.read(8))
                if length > MAX_HEADER:
                    return None
                names += [k for k in json.loads(f.read(length)) if k != "__metadata__"]
        return names
    except (OSError, ValueError, struct.error, AttributeError):
        return None


def has_bundled_mtp(path: Path) -> bool:
    """True when the checkpoint carries a native MTP head (``mtp.*`` tensors)."""
    index = path / INDEX
    if index.is_file():
        return any(k.startswith("mtp.") for k in json.loads(index.read_text()).get("weight_map", {}))
    from safetensors import safe_open

    for file in path.glob("*.safetensors"):
        with safe_open(str(file), framework="numpy") as f:
            if any(k.startswith("mtp.") for k in f.keys()):
                return True
    return False


def has_mtp(path: Path) -> bool:
    """Whether the checkpoint carries an MTP head: ``mtp.*`` tensors, or, when its tensors cannot be read, a
    config that declares MTP layers. A config that declares them over weights without them (converted
    checkpoints often drop the head) reads false: there would be nothing to draft with."""
    names = tensor_names(path)
    if names is not None:
        return any(name.startswith("mtp.") for name in names)
    try:
        config = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return False
    layers = [config.get("mtp_num_hidden_layers"), (config.get("text_config") or {}).get("mtp_num_hidden_layers")]
    return any(isinstance(n, int) and n > 0 for n in layers)


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
    """One per cached repository that holds a checkpoint: the snapshot ``refs/main`` names, else the newest."""
    found = []
    try:
        repos = sorted(p for p in cache.iterdir() if p.name.startswith("models--") and p.is_dir())
    except OSError:
        return found
    for repo in repos:
        snapshots = repo / "snapshots"
        try:
            candidates = sorted((p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime,
                                reverse=True)
        except OSError:
            continue
        ref = repo / "refs" / "main"
        if ref.is_file():
            main = snapshots / ref.read_text().strip()
            candidates = [main, *(p for p in candidates if p != main)]
        snapshot = next((p for p in candidates if is_checkpoint(p)), None)
        if snapshot is not None:
            name = repo.name.removeprefix("models--").replace("--", "/")
            found.append(Listed(name, snapshot, size_bytes(snapshot)))
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
