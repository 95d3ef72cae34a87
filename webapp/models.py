"""``GET /api/models``: the models the engine picker can offer, and whether MTPLX can run here.

Checkpoints (a folder with ``config.json`` and ``*.safetensors``) are found in the local Hugging Face
cache, in the models folder (``--models-dir``) and as the bundled demo model, each with its size,
whether it carries an MTP head and, when it does not, the drafter the MLX engine would find for it. With ``?base_url=URL`` the answer also lists what the server at that
address serves (its ``/v1/models``).
"""

from __future__ import annotations

import json
import platform
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from flask import Blueprint, current_app, jsonify, request

from engines.errors import EngineError
from engines.mlx.drafter_search import DrafterSearch, available_drafter, hf_hub_cache, tensor_names
from engines.registry import MTPLX_URL, TabPolicy

from .errors import ClientError, error_body

bp = Blueprint("models", __name__, url_prefix="/api")
MODELS_DIR_DEPTH = 2  # models/NAME and models/ORG/NAME
PROBE_TIMEOUT_S = 1.0
SERVED_TIMEOUT_S = 3.0


@bp.errorhandler(ClientError)
def _client_error(exc: ClientError):
    return jsonify(error_body(exc.code, exc.message)), exc.status


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


def describe(name: str, path: Path, source: str, models_dir: Path | None = None) -> dict:
    """A listed model; ``drafter``: for one without an MTP head, the drafter folder (or the hub id whose head is
    in the hub cache) the MLX engine would use, found as it finds one (engines/mlx/drafter_search.py)."""
    mtp = has_mtp(path)
    drafter = None if mtp else available_drafter(path, DrafterSearch(models_dir=models_dir))
    return {"name": name, "path": str(path), "size_bytes": size_bytes(path), "mtp": mtp, "drafter": drafter,
            "source": source}


def hf_cache_models(cache: Path) -> list[dict]:
    """One entry per cached repository that holds a checkpoint: the snapshot ``refs/main`` names, else the
    newest one."""
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
            found.append(describe(repo.name.removeprefix("models--").replace("--", "/"), snapshot, "hf-cache"))
    return found


def models_dir_models(root: Path) -> list[dict]:
    found = []

    def walk(folder: Path, depth: int) -> None:
        try:
            children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return
        for child in children:
            if is_checkpoint(child):
                found.append(describe(child.relative_to(root).as_posix(), child, "models-dir", root))
            elif depth > 1:
                walk(child, depth - 1)

    walk(root, MODELS_DIR_DEPTH)
    return found


def bundled_models() -> list[dict]:
    from demo_model import DEFAULT_MODEL

    return [describe(DEFAULT_MODEL.name, DEFAULT_MODEL, "bundled")] if is_checkpoint(DEFAULT_MODEL) else []


def apple_silicon() -> bool:
    return platform.system() == "Darwin" and platform.machine() == "arm64"


def mtplx_answers(url: str) -> bool:
    """Whether an MTPLX daemon answers ``GET /health`` at ``url``."""
    try:
        response = httpx.get(url.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S)
        body = response.json()
    except (httpx.HTTPError, ValueError):
        return False
    return response.status_code == 200 and isinstance(body, dict) and body.get("ok") is True


def checked_url(url: str, policy: TabPolicy) -> str:
    """``url`` when a tab may have the server ask it (as for an engine switch), else ClientError."""
    try:
        return policy.check_url(url).rstrip("/")
    except EngineError as exc:
        raise ClientError("bad_base_url", exc.message) from None


def served_models(url: str, api_key: str | None) -> dict:
    """What the server at ``url`` lists at ``/v1/models`` (``url`` may be its /v1 URL or its root)."""
    endpoint = url + ("/models" if urlsplit(url).path.endswith("/v1") else "/v1/models")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(endpoint, headers=headers, timeout=SERVED_TIMEOUT_S)
    except httpx.HTTPError as exc:
        return {"base_url": url, "models": [], "error": f"No answer from {endpoint} ({type(exc).__name__}): "
                "check the address, or type the model's name."}
    try:
        data = response.json().get("data") if response.status_code == 200 else None
    except (ValueError, AttributeError):
        data = None
    if not isinstance(data, list):
        hint = "it wants an API key" if response.status_code == 401 else f"HTTP {response.status_code}"
        return {"base_url": url, "models": [], "error": f"{endpoint} gave no model list ({hint}): type the "
                "model's name."}
    ids = [item["id"] for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)]
    return {"base_url": url, "models": ids, "error": None}


def listed_models(models_dir: str | Path | None) -> list[dict]:
    """The models the picker offers: the bundled one, the models folder's and the Hugging Face cache's."""
    return [*bundled_models(), *(models_dir_models(Path(models_dir)) if models_dir else []),
            *hf_cache_models(hf_hub_cache())]


@bp.get("/models")
def list_models():
    host = current_app.extensions["specchat"]
    spec = host.spec
    body = {"ok": True, "models": listed_models(current_app.config.get("MODELS_DIR"))}
    base_url = request.args.get("base_url", "").strip()
    if base_url:
        base_url = checked_url(base_url, host.policy)
        # The key this server already holds for that address; a key never travels in a URL.
        key = spec.api_key if spec.base_url and spec.base_url.rstrip("/") == base_url else None
        body["served"] = served_models(base_url, key)
    daemons = {MTPLX_URL, *([spec.base_url] if spec.name == "mtplx" and spec.base_url else [])}
    if base_url and not urlsplit(base_url).path.rstrip("/"):
        daemons.add(base_url)  # a daemon's root address, as the MTPLX engine takes it
    body["mtplx"] = (apple_silicon() or (spec.name == "mtplx" and host.engine.info().state == "ready")
                     or any(mtplx_answers(url) for url in sorted(daemons)))
    return jsonify(body)
