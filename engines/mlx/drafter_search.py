"""Find, or build, the MTP head of a checkpoint that was converted without it.

``mlx_vlm.convert`` drops every ``mtp.*`` tensor (``--mtp`` writes them to a folder beside instead), and the
published conversions carry none. The head is looked for, in this order, each checked against the body
(hidden size, vocabulary, layer count):

1. a standalone drafter folder, as ``convert --mtp`` writes it: ``<model>-mtp`` beside the model, in the
   models folder (``NAME-mtp``, ``ORG/NAME-mtp``) or in the hub cache (``ORG/NAME-mtp``), or one built
   here before (``<data>/drafters/``);
2. the original Hugging Face checkpoint the model was converted from (``--drafter-from ORG/NAME``, else
   ``base_model`` in the model's README front-matter or config.json) in the local hub cache: config.json,
   the index, and the shard(s) that the index says hold ``mtp.*``;
3. with downloads allowed, exactly those files of that checkpoint, fetched into the hub cache (never the
   rest of its weights).

A head found as 2 or 3 is extracted, quantized as the body is (its bits, group size and mode) or kept in
the body's activation dtype, and stored under ``<data>/drafters/`` for next time.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EngineError
from .checkpoints import (INDEX, cached_file, head_shards, hf_hub_cache, hub_repo_of, is_checkpoint, read_json,
                          tensor_names)

log = logging.getLogger(__name__)
DRAFTER_TYPE = "qwen3_5_mtp"
BODY_TYPES = ("qwen3_5", "qwen3_5_moe")  # model types whose MTP head mlx-vlm's splitter extracts
SHAPE_KEYS = (("hidden_size", "hidden size"), ("vocab_size", "vocabulary"), ("num_hidden_layers", "layer count"))


class NoDrafter(EngineError):
    code = "no_drafter"


@dataclass(frozen=True)
class DrafterSearch:
    """Where to look for a head and what may be done to get one."""

    data_dir: Path | None = None  # built drafters are stored under its drafters/
    models_dir: Path | None = None
    allow_downloads: bool = False  # fetch the head's shard(s) of the base model
    base_model: str | None = None  # --drafter-from: the hub id the model was converted from
    report: Callable[[str], None] | None = field(default=None, compare=False)  # a slow step, in words


@dataclass(frozen=True)
class FoundDrafter:
    path: Path
    how: str  # where it came from, in words


def text_config(config: dict) -> dict:
    text = config.get("text_config")
    return text if isinstance(text, dict) else config


def mismatch(body: dict, other: dict) -> str | None:
    """How ``other``'s text model differs from the body's (hidden size, vocabulary, layers), or None."""
    mine, theirs = text_config(body), text_config(other)
    for key, words in SHAPE_KEYS:
        if mine.get(key) != theirs.get(key):
            return f"{words} {theirs.get(key)}, not {mine.get(key)}"
    return None


def base_models(path: Path, config: dict) -> list[str]:
    """The hub ids the model says it was converted from: README front-matter ``base_model``, then config."""
    found: list[str] = []
    readme = path / "README.md"
    if readme.is_file():
        import yaml
        from huggingface_hub.repocard import metadata_load

        try:
            meta = metadata_load(readme) or {}
        except (OSError, ValueError, yaml.YAMLError):  # a malformed card names nothing
            meta = {}
        found += _ids(meta.get("base_model"))
    found += _ids(config.get("base_model"))
    return list(dict.fromkeys(found))


def _ids(value) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [v for v in values if isinstance(v, str) and "/" in v and not v.startswith(("/", "."))]


def quantization(config: dict) -> dict | None:
    """The body's quantization (bits, group size, mode), without per-layer entries."""
    q = config.get("quantization")
    if not isinstance(q, dict) or not isinstance(q.get("bits"), int):
        return None
    return {"group_size": q.get("group_size", 64), "bits": q["bits"], "mode": q.get("mode", "affine")}


def body_dtype(path: Path) -> str:
    """The body's activation dtype: that of its embedding (its scales, when quantized)."""
    from safetensors import safe_open

    index = (read_json(path / INDEX) or {}).get("weight_map") or {}
    files = sorted({path / f for f in index.values()}) or sorted(path.glob("*.safetensors"))
    names = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}
    for file in files:
        with safe_open(str(file), framework="numpy") as f:
            for suffix in ("embed_tokens.scales", "embed_tokens.weight"):
                key = next((k for k in f.keys() if k.endswith(suffix)), None)
                if key is not None:
                    return names.get(f.get_slice(key).get_dtype(), "bfloat16")
    return "bfloat16"


def store_name(repo_id: str, config: dict, dtype: str) -> str:
    """``ORG--NAME-mtp-4bit-g64`` (``-mxfp4-g32`` for another mode) or ``ORG--NAME-mtp-bfloat16``."""
    q = quantization(config)
    if q is None:
        kind = dtype
    else:
        kind = f"{q['bits']}bit-g{q['group_size']}" if q["mode"] == "affine" else f"{q['mode']}-g{q['group_size']}"
    return f"{repo_id.replace('/', '--')}-mtp-{kind}"


class Finder:
    """One search for the head of the model in ``path``."""

    def __init__(self, path: Path, search: DrafterSearch):
        self.path, self.search = path, search
        self.config = read_json(path / "config.json") or {}
        self.rejected: list[str] = []  # what was found but does not fit, for the message

    # --- 1. standalone drafter folders ---
    def names(self) -> list[str]:
        """The model's own names: its hub id, else its folder's name (and its models-folder path)."""
        repo = hub_repo_of(self.path)
        names = [repo] if repo else []
        if self.search.models_dir is not None:
            try:
                names.append(self.path.relative_to(self.search.models_dir.resolve()).as_posix())
            except ValueError:
                pass
        return [*names, self.path.name]

    def standalone_folders(self) -> list[tuple[Path, str]]:
        folders = [(self.path.parent / f"{self.path.name}-mtp", "beside the model")]
        repo = hub_repo_of(self.path)
        if repo:
            config = cached_file(f"{repo}-mtp", "config.json")
            if config is not None:
                folders.append((config.parent, "in the hub cache"))
        if self.search.models_dir is not None:
            for name in self.names():
                folders.append((self.search.models_dir / f"{name}-mtp", "in the models folder"))
        if self.search.data_dir is not None:
            dtype = body_dtype(self.path)
            for repo_id in self.bases():
                folders.append((self.store / store_name(repo_id, self.config, dtype), "built before"))
        return list(dict.fromkeys(folders))

    def fits(self, folder: Path) -> bool:
        config = read_json(folder / "config.json") if is_checkpoint(folder) else None
        if config is None or config.get("model_type") != DRAFTER_TYPE:
            return False
        why = mismatch(self.config, config)
        if why:
            self.rejected.append(f"{folder} does not fit this model ({why})")
            return False
        return True

    # --- 2 and 3. the base model's head ---
    @property
    def store(self) -> Path:
        return self.search.data_dir / "drafters"

    def bases(self) -> list[str]:
        given = [self.search.base_model] if self.search.base_model else []
        return given or base_models(self.path, self.config)

    def cached_head(self, repo_id: str) -> Path | None:
        """The snapshot holding ``repo_id``'s config and head shard(s) in the hub cache, or None."""
        config = cached_file(repo_id, "config.json")
        if config is None:
            return None
        folder = config.parent
        if cached_file(repo_id, INDEX) is not None:
            shards = head_shards(folder)
            if not shards:
                raise self.headless(repo_id)
            return folder if all(cached_file(repo_id, shard) is not None for shard in shards) else None
        names = tensor_names(folder)
        if names and not any(n.startswith("mtp.") for n in names):
            raise self.headless(repo_id)
        return folder if names else None

    @staticmethod
    def headless(repo_id: str) -> NoDrafter:
        return NoDrafter(f"This conversion dropped its MTP head, and its base model {repo_id} has none either "
                         "(no mtp.* weights). Pass --drafter FOLDER with a drafter made for it, or run without one.")

    def download_head(self, repo_id: str) -> Path:
        """Fetch config.json, the index and the shard(s) holding ``mtp.*`` of ``repo_id``, nothing else."""
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

        cache = hf_hub_cache()
        try:
            config = Path(hf_hub_download(repo_id, "config.json", cache_dir=cache))
            try:
                hf_hub_download(repo_id, INDEX, cache_dir=cache)
            except EntryNotFoundError:
                raise NoDrafter(
                    f"{repo_id} keeps all its weights in one file, so its MTP head cannot be fetched alone. "
                    f"Download it (hf download {repo_id}) and run {self.command()} again, or pass "
                    "--drafter FOLDER.") from None
            shards = head_shards(config.parent)
            if not shards:
                raise self.headless(repo_id)
            for shard in shards:
                log.info("fetching %s of %s (the shard holding its MTP head)", shard, repo_id)
                hf_hub_download(repo_id, shard, cache_dir=cache)
        except (HfHubHTTPError, LocalEntryNotFoundError, OSError) as exc:
            raise NoDrafter(f"Could not fetch the MTP head of {repo_id} ({type(exc).__name__}: {str(exc)[:200]}). "
                            f"Check the id and the network and run {self.command('--allow-downloads')} again, or pass "
                            "--drafter FOLDER.") from None
        return config.parent

    def build(self, source: Path, repo_id: str) -> Path:
        """Extract the head from ``source``, quantize it as the body is (or cast it to the body's dtype),
        store it and return its folder."""
        why = mismatch(self.config, read_json(source / "config.json") or {})
        if why:
            raise NoDrafter(f"{repo_id} does not fit this model ({why}): it is not the checkpoint this one was "
                            f"converted from. Run {self.command(base='ORG/NAME')} with the right one, or pass "
                            "--drafter FOLDER.")
        dtype = body_dtype(self.path)
        out = self.store / store_name(repo_id, self.config, dtype)
        write_drafter(source, out, dtype, quantization(self.config), repo_id)
        return out

    def command(self, *extra: str, base: str | None = None) -> str:
        """The ``specchat drafter`` line for this model (with ``--from`` when the base was given, or ``base``)."""
        parts = ["specchat", "drafter", "--for", hub_repo_of(self.path) or str(self.path)]
        base = base or self.search.base_model
        if base:
            parts += ["--from", base]
        return "`" + shlex.join([*parts, *extra]) + "`"

    def say(self, step: str) -> None:
        log.info("drafter: %s", step)
        if self.search.report is not None:
            self.search.report(step)

    def find(self) -> FoundDrafter:
        for folder, how in self.standalone_folders():
            if self.fits(folder):
                return FoundDrafter(folder, f"{folder.name}, {how}")
        bases = self.bases()
        for repo_id in bases:
            source = self.cached_head(repo_id)
            how = "from the hub cache"
            if source is None and self.search.allow_downloads:
                self.say(f"fetching the MTP head of {repo_id} (only the shards that hold it)")
                source, how = self.download_head(repo_id), "with only its MTP shard downloaded"
            if source is not None:
                if self.search.data_dir is None:
                    raise NoDrafter(f"{repo_id}'s MTP head is in the hub cache, but there is no data folder to "
                                    f"store a drafter in. Run {self.command()}, then pass --drafter with "
                                    "the folder it prints.")
                self.say(f"building a drafter from the MTP head of {repo_id}")
                out = self.build(source, repo_id)
                return FoundDrafter(out, f"built from {repo_id} {how}")
        raise NoDrafter(self.nothing_found(bases))

    def available(self) -> str | None:
        """What ``find`` would use without building or fetching anything: a drafter folder, or the hub id
        whose head the hub cache holds; None when it would find nothing offline."""
        for folder, _ in self.standalone_folders():
            if self.fits(folder):
                return str(folder)
        for repo_id in self.bases():
            try:
                if self.cached_head(repo_id) is not None:
                    return repo_id
            except NoDrafter:
                continue
        return None

    def nothing_found(self, bases: list[str]) -> str:
        drop = "This conversion dropped its MTP head, so specchat cannot draft with it."
        beside = ("pass --drafter FOLDER, a drafter as `mlx_vlm.convert --mtp` writes it" if hub_repo_of(self.path)
                  else f"pass --drafter {self.path}-mtp (the folder `mlx_vlm.convert --mtp` writes beside it)")
        if bases:
            repo = bases[0]
            fix = (f"{drop} Its base model {repo} is not in the hub cache. Run {self.command('--allow-downloads')} "
                   f"(it fetches only the shard holding the head), start specchat with "
                   f"--allow-downloads, or {beside}.")
        else:
            fix = (f"{drop} It does not say which checkpoint it was converted from. Run "
                   f"{self.command(base='ORG/NAME')} with the Hugging Face checkpoint it was made from, or {beside}.")
        if self.rejected:
            fix += " Found but not used: " + "; ".join(self.rejected) + "."
        return fix


def can_search(config: dict) -> bool:
    """Whether this model's family has an MTP head that can be found and extracted."""
    return config.get("model_type") in BODY_TYPES


def find_drafter(path: Path, search: DrafterSearch) -> FoundDrafter:
    """The head for the model in ``path``; NoDrafter saying how to get one."""
    return Finder(path, search).find()


def available_drafter(path: Path, search: DrafterSearch) -> str | None:
    """For a model without a bundled head: the drafter folder, or the hub id whose head, it would get offline."""
    finder = Finder(path, search)
    return finder.available() if can_search(finder.config) else None


def write_drafter(source: Path, out: Path, dtype: str, quantize: dict | None, repo_id: str) -> None:
    """A standalone drafter folder at ``out`` from the ``mtp.*`` tensors of the checkpoint in ``source``:
    floats cast to ``dtype``, then quantized as ``quantize`` says (None: kept in ``dtype``)."""
    import mlx.core as mx
    from mlx_vlm.speculative.drafters.mtp_split import get_mtp_splitter

    config = read_json(source / "config.json") or {}
    splitter = get_mtp_splitter(source_config=config)
    if splitter is None:
        raise NoDrafter(f"{repo_id} is not a checkpoint whose MTP head specchat can extract. Pass --drafter FOLDER.")
    draft_config, weights = splitter.prepare(source, source_config=config)
    cast = getattr(mx, dtype)
    weights = {k: v.astype(cast) if mx.issubdtype(v.dtype, mx.floating) else v for k, v in weights.items()}
    if quantize is not None:
        weights = quantized(weights, quantize)
        draft_config["quantization"] = draft_config["quantization_config"] = quantize
    draft_config["base_model"] = repo_id
    if isinstance(draft_config.get("text_config"), dict):  # the dtype it holds now, not the source's
        draft_config["text_config"] = {**draft_config["text_config"], "dtype": dtype}
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)  # a build cut short before; only ever written here
    partial.mkdir(parents=True)
    mx.save_safetensors(str(partial / "model.safetensors"), weights, metadata={"format": "mlx"})
    (partial / "config.json").write_text(json.dumps(draft_config, indent=2, sort_keys=True))
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)  # whole or not at all: a folder here is always a complete drafter


def quantized(weights: dict, q: dict) -> dict:
    """Every matrix whose rows split into whole groups, quantized (as mlx-vlm quantizes its drafters)."""
    import mlx.core as mx

    out = dict(weights)
    for key, value in weights.items():
        if not key.endswith(".weight") or key.endswith("mlp.gate.weight"):
            continue  # an MoE router stays in full precision, as in mlx-vlm
        if value.ndim < 2 or value.shape[-1] % q["group_size"]:
            continue
        parts = mx.quantize(value, group_size=q["group_size"], bits=q["bits"], mode=q["mode"])
        stem = key.removesuffix(".weight")
        out[key], out[f"{stem}.scales"] = parts[0], parts[1]
        if len(parts) == 3:
            out[f"{stem}.biases"] = parts[2]
    return out
