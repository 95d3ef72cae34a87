"""Find, read and load a model and its drafter (MLX imports happen in functions)."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ModelNotFound
from .checkpoints import has_bundled_mtp, is_checkpoint
from .drafter_search import DrafterSearch, FoundDrafter, NoDrafter, can_search, find_drafter
from .widening import widen_to_declared

log = logging.getLogger(__name__)

# Keys mlx-vlm's qwen3_5 config requires inside rope_parameters.
REQUIRED_ROPE_KEYS = ("partial_rotary_factor", "type", "mrope_section", "rope_theta")
MLX_DRAFTERS_LOGGER = "mlx_vlm.speculative.drafters"  # the module whose load_drafter specchat calls


def looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", ".", "~")) or Path(spec).expanduser().exists()


class Option(NamedTuple):
    """The option a model spec came from, for messages that say what to pass instead."""

    flag: str
    kind: str  # what it names: "model" or "drafter"


MODEL = Option("--model", "model")
DRAFTER = Option("--drafter", "drafter")


def check_model_dir(spec: str, option: Option = MODEL) -> None:
    """Raise ModelNotFound unless a local spec is a folder holding a checkpoint."""
    if not looks_like_path(spec):
        return  # a hub id; resolved when loading
    path = Path(spec).expanduser()
    flag, kind = option
    if not path.exists():
        raise ModelNotFound(f"{kind.capitalize()} path {spec} does not exist. Pass {flag} a {kind} folder or a hub id.")
    if is_checkpoint(path):
        return
    if not (path / "config.json").is_file():
        raise ModelNotFound(
            f"{spec} is not a {kind} folder (no config.json). Pass {flag} a folder with config.json and weights."
        )
    raise ModelNotFound(f"{spec} has no *.safetensors weights. Pass {flag} a complete {kind} folder.")


def resolve(spec: str, option: Option = MODEL) -> Path:
    """A local folder for ``spec``: the path itself, or the hub cache's copy."""
    if looks_like_path(spec):
        check_model_dir(spec, option)
        return Path(spec).expanduser().resolve()
    from mlx_vlm.utils import get_model_path

    try:
        return Path(get_model_path(spec))
    except Exception as exc:
        raise ModelNotFound(
            f"Could not get {option.kind} {spec} ({exc}). Check the id, or download it and pass its folder to "
            f"{option.flag}."
        ) from exc


def normalise_rope_parameters(config: dict) -> dict:
    """Derive ``partial_rotary_factor`` from ``factor`` where a config only has the latter."""
    text = config.get("text_config")
    rope = text.get("rope_parameters") if isinstance(text, dict) else None
    if not isinstance(rope, dict) or "partial_rotary_factor" in rope:
        return config
    factor = rope.get("factor")
    if isinstance(factor, (int, float)) and factor:
        rope["partial_rotary_factor"] = 1.0 / float(factor)
        log.info("rope_parameters: partial_rotary_factor derived from factor=%s", factor)
    return config


def read_config(path: Path) -> dict:
    """The model's own config.json: apply_chat_template needs its model_type."""
    return normalise_rope_parameters(json.loads((path / "config.json").read_text()))


@dataclass
class LoadedModel:
    model: Any
    processor: Any
    tokenizer: Any
    config: dict
    path: Path
    drafter: Any = None
    drafter_kind: str | None = None
    drafter_name: str | None = None
    drafter_note: str | None = None  # why there is no drafter and how to get one, for the presenter


@contextmanager
def normalised(path: Path):
    """``path`` itself when its config.json needs no change; else, while open, a folder that links
    every file of the checkpoint but holds the normalised config.json (mlx-vlm reads the file itself)."""
    config = read_config(path)
    if json.loads((path / "config.json").read_text()) == config:
        yield path
        return
    view = Path(tempfile.mkdtemp(prefix="specchat-model-"))
    try:
        for file in path.iterdir():
            if file.name != "config.json":
                (view / file.name).symlink_to(file.resolve())
        (view / "config.json").write_text(json.dumps(config, indent=2))
        log.info("loading %s with a normalised config.json", path)
        yield view
    finally:
        shutil.rmtree(view, ignore_errors=True)  # only our links and the config copy live there


class _DrafterKindWording(logging.Filter):
    """mlx-vlm logs the drafter kind it detected as its own command line's ``--draft-kind`` flag, which
    specchat does not have: the line says what was found instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("Auto-detected --draft-kind="):
            record.msg = "drafter kind %r detected for %s (model_type %r)"
        return True


@contextmanager
def drafter_kind_worded():
    """While open, mlx-vlm's drafter loading logs the kind it detects in specchat's words."""
    logger, wording = logging.getLogger(MLX_DRAFTERS_LOGGER), _DrafterKindWording()
    logger.addFilter(wording)
    try:
        yield
    finally:
        logger.removeFilter(wording)


def load_model(spec: str) -> LoadedModel:
    from mlx_vlm import load

    from .compile_cache import keep_compiled_kernels

    keep_compiled_kernels()
    path = resolve(spec)
    with normalised(path) as source:
        model, processor = load(str(source))[:2]
    tokenizer = getattr(processor, "tokenizer", processor)
    config = read_config(path)
    widen_to_declared(model, config)
    return LoadedModel(model, processor, tokenizer, config, path)


def load_drafter(loaded: LoadedModel, spec: str | None, search: DrafterSearch | None = None) -> None:
    """Attach a drafter: ``spec`` (a folder or hub id), or when spec is None the bundled MTP head, else
    the head ``search`` finds or builds (engines/mlx/drafter_search.py).

    ``load_drafter`` on the main checkpoint extracts only its ``mtp.*`` head, so
    the target is not loaded twice.
    """
    from mlx_vlm.speculative.drafters import load_drafter as mlx_load_drafter

    if spec is None:
        if has_bundled_mtp(loaded.path):
            source, name = loaded.path, "bundled MTP head"
        else:
            found = search_head(loaded, search or DrafterSearch())
            if found is None:
                return
            source, name = found.path, str(found.path)
    else:
        source, name = resolve(spec, DRAFTER), spec
    with normalised(source) as folder, drafter_kind_worded():
        drafter, kind = mlx_load_drafter(str(folder))
        widen_to_declared(drafter, read_config(folder))
    loaded.drafter, loaded.drafter_kind, loaded.drafter_name = drafter, kind, f"{name} ({kind})"


def search_head(loaded: LoadedModel, search: DrafterSearch) -> FoundDrafter | None:
    """The head of a checkpoint converted without it, or None with ``loaded.drafter_note`` saying why."""
    if not can_search(loaded.config):
        log.info("no bundled MTP head in %s: speculative decoding unavailable", loaded.path)
        return None
    try:
        found = find_drafter(loaded.path, search)
    except NoDrafter as exc:
        log.warning("no drafter: %s", exc.message)
        loaded.drafter_note = exc.message
        return None
    log.info("drafter for %s: %s (%s)", loaded.path, found.path, found.how)
    return found
