"""``specchat drafter --for MODEL [--from ORG/NAME]``: find or build the MTP head of a checkpoint converted
without it (engines/mlx/drafter_search.py), store it in the data folder and say how to use it."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from engines.mlx.checkpoints import cached_file, has_bundled_mtp, read_json
from engines.mlx.drafter_search import DrafterSearch, NoDrafter, base_models, can_search, find_drafter

from .arguments import default_data_dir, hub_id


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and status 2, no usage dump
        self.exit(2, f"specchat drafter: {message}\n")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="specchat drafter", description="Find or build the MTP head of a checkpoint converted "
                     "without it, and store it in the data folder.")
    parser.add_argument("--for", dest="model", required=True,
                        help="the model folder, or the hub id of a model in the hub cache")
    parser.add_argument("--from", dest="base", type=hub_id, default=None, metavar="ORG/NAME",
                        help="the Hugging Face checkpoint it was converted from (default: the model's base_model)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help=f"where the drafter is stored, under drafters/ (default {default_data_dir()})")
    parser.add_argument("--models-dir", type=Path, default=None,
                        help="a folder of model folders to look in too (default: the data folder's models/)")
    parser.add_argument("--allow-downloads", action="store_true",
                        help="fetch the shard(s) holding the head (and the config and index) of the base model")
    return parser.parse_args(argv)


def model_folder(spec: str) -> Path:
    """The folder of ``spec``: a path, or a hub id's snapshot in the hub cache (nothing is downloaded)."""
    from engines.mlx.loading import Option, check_model_dir, looks_like_path

    if looks_like_path(spec):
        check_model_dir(spec, Option("--for", "model"))
        return Path(spec).expanduser().resolve()
    config = cached_file(spec, "config.json")
    if config is None:
        raise NoDrafter(f"{spec} is not in the hub cache. Pass --for the model's folder, or the hub id of a model "
                        "you have downloaded.")
    return config.parent


def main(argv: list[str]) -> int:
    from engines import EngineError

    args = parse_args(argv)
    data_dir = (args.data_dir or default_data_dir()).expanduser()
    search = DrafterSearch(data_dir=data_dir, models_dir=(args.models_dir or data_dir / "models").expanduser(),
                           allow_downloads=args.allow_downloads, base_model=args.base)
    try:
        path = model_folder(args.model)
        if has_bundled_mtp(path):
            print(f"specchat drafter: {args.model} carries its own MTP head: specchat drafts with it as it is.")
            return 0
        if not can_search(read_json(path / "config.json") or {}):
            raise NoDrafter(f"{args.model} is not a Qwen 3.5 checkpoint, whose MTP head specchat can find. Pass "
                            "specchat --drafter a drafter made for it.")
        found = find_drafter(path, search)
    except EngineError as exc:
        print(f"specchat drafter: {exc.message}", file=sys.stderr)
        return 1
    print(f"specchat drafter: {found.path} ({found.how})")
    use = shlex.join(["specchat", "--model", args.model, "--drafter", str(found.path)])
    if args.base and args.base not in base_models(path, read_json(path / "config.json") or {}):
        found_by = f"--drafter-from {args.base} in place of --drafter finds it too"
    else:
        found_by = "specchat also finds it by itself, with this data folder"
    print(f"Use it: {use} ({found_by})")
    return 0
