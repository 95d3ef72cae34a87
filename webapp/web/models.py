"""``GET /api/models``: the models the engine picker can offer, and whether MTPLX can run here.

Checkpoints are found in the local Hugging Face cache, in the models folder (``--models-dir``) and as the
bundled demo model, as the MLX engine inspects them (engines/mlx/checkpoints.py), each with its size, whether
it carries an MTP head and, when it does not, the drafter the MLX engine would find for it. With
``?base_url=URL`` the answer also lists what the server at that address serves (its ``/v1/models``).
"""

from __future__ import annotations

import platform
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from flask import Blueprint, current_app, jsonify, request

from engines.errors import EngineError
from engines.mlx.checkpoints import (Listed, has_bundled_mtp, hf_hub_cache, hub_checkpoints, is_checkpoint,
                                     models_dir_checkpoints, size_bytes)
from engines.mlx.drafter_search import DrafterSearch, available_drafter
from engines.registry import MTPLX_URL, TabPolicy

from ..errors import ClientError, error_body

bp = Blueprint("models", __name__, url_prefix="/api")
PROBE_TIMEOUT_S = 1.0
SERVED_TIMEOUT_S = 3.0


@bp.errorhandler(ClientError)
def _client_error(exc: ClientError):
    return jsonify(error_body(exc.code, exc.message)), exc.status


def describe(listed: Listed, source: str, models_dir: Path | None = None) -> dict:
    """A listed model; ``drafter``: for one without an MTP head, the drafter folder (or the hub id whose head is
    in the hub cache) the MLX engine would use, found as it finds one (engines/mlx/drafter_search.py)."""
    mtp = has_bundled_mtp(listed.path)
    drafter = None if mtp else available_drafter(listed.path, DrafterSearch(models_dir=models_dir))
    return {"name": listed.name, "path": str(listed.path), "size_bytes": listed.size_bytes, "mtp": mtp,
            "drafter": drafter, "source": source}


def hf_cache_models(cache: Path) -> list[dict]:
    return [describe(listed, "hf-cache") for listed in hub_checkpoints(cache)]


def models_dir_models(root: Path) -> list[dict]:
    return [describe(listed, "models-dir", root) for listed in models_dir_checkpoints(root)]


def bundled_models() -> list[dict]:
    from demo_model import DEFAULT_MODEL

    if not is_checkpoint(DEFAULT_MODEL):
        return []
    return [describe(Listed(DEFAULT_MODEL.name, DEFAULT_MODEL, size_bytes(DEFAULT_MODEL)), "bundled")]


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
        return {"base_url": url, "models": [], "error": {
            "code": "server_unreachable",
            "message": f"No answer from {endpoint} ({type(exc).__name__}): check the address, or type the model's "
                       "name."}}
    try:
        data = response.json().get("data") if response.status_code == 200 else None
    except (ValueError, AttributeError):
        data = None
    if not isinstance(data, list):
        hint = "it wants an API key" if response.status_code == 401 else f"HTTP {response.status_code}"
        return {"base_url": url, "models": [], "error": {
            "code": "no_model_list", "message": f"{endpoint} gave no model list ({hint}): type the model's name."}}
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
