"""Turn trained weights into an MLX qwen3_5 checkpoint and check it against PyTorch.

TRAINED holds what ``training.train`` wrote (weight shards in mlx-vlm's key
layout, text_config.json, reference.npz). The checkpoint gets the tokenizer
files from TOKENIZER, a tiny unused vision tower (mlx-vlm's qwen3_5 class needs
one), and one ``model.safetensors`` with the MTP head under ``mtp.*``. Then
mlx-vlm loads it, and its logits (body and MTP head, through
``load_drafter``) are compared with the PyTorch logits on the same ids.

    python -m training.export TRAINED OUT --tokenizer demo_model/specchat-demo
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from demo_model.architecture import DEMO_CONTEXT, text_config
from demo_model.checkpoint_files import checkpoint_config, fresh_folder, special_ids

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
KEPT_FILES = ("examples.json",)  # written by hand for the shipped model: a re-export keeps it
PARITY_TOLERANCE = 2e-3
# Stored at two bytes a weight, so that a retrain adds half as much to the repository; the config declares
# float32, and specchat and this project's scripts widen the weights to it at load.
STORED_DTYPE = "float16"
# Rounding to float16 may move a logit by more than PARITY_TOLERANCE; the stored weights must still pick
# the same next token nearly everywhere.
STORED_ARGMAX_AGREEMENT = 0.995


def tokenizer_ids(tokenizer_dir: Path) -> dict[str, int]:
    from tokenizers import Tokenizer

    return special_ids(Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")))


def read_trained(trained: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    weights: dict[str, np.ndarray] = {}
    for shard in sorted(trained.glob("weights-*.safetensors")):
        weights.update(load_file(str(shard)))
    return weights


def write_checkpoint(weights: dict[str, np.ndarray], tokenizer_dir: Path, out: Path,
                     stored: str = STORED_DTYPE) -> Path:
    """Write a complete checkpoint folder; every mlx-vlm parameter must come from ``weights`` or the vision stub.

    The weights are stored as ``stored`` (float16 or float32); the config declares float32 either way.
    """
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_vlm.models.qwen3_5 import Model, ModelConfig
    from mlx_vlm.speculative.drafters.qwen3_5_mtp.config import Qwen3_5MTPConfig
    from mlx_vlm.speculative.drafters.qwen3_5_mtp.qwen3_5_mtp import Qwen3_5MTPDraftModel

    ids = tokenizer_ids(tokenizer_dir)
    config = checkpoint_config(
        ids, text_config(ids["vocab_size"], max_position_embeddings=DEMO_CONTEXT, dtype="float32"))
    mx.random.seed(0)
    expected = dict(tree_flatten(Model(ModelConfig.from_dict(config)).parameters()))
    mtp = Qwen3_5MTPDraftModel(Qwen3_5MTPConfig.from_dict(config))
    expected.update({f"mtp.{k}": v for k, v in tree_flatten(mtp.parameters())})
    trained_keys = {k for k in expected if not k.startswith("vision_tower.")}
    if set(weights) != trained_keys:
        raise ValueError(
            f"trained weights do not match mlx-vlm's parameters: missing {sorted(trained_keys - set(weights))[:5]}, "
            f"unexpected {sorted(set(weights) - trained_keys)[:5]}"
        )
    out_weights = {}
    for key, ref in expected.items():
        value = mx.array(weights[key]) if key in weights else ref
        if value.shape != ref.shape:
            raise ValueError(f"{key}: shape {value.shape}, mlx-vlm expects {ref.shape}")
        out_weights[key] = value.astype(getattr(mx, stored))
    # Read first: OUT may be the folder the tokenizer files come from.
    tokenizer_files = {name: (tokenizer_dir / name).read_bytes() for name in TOKENIZER_FILES}
    fresh_folder(out, keep=KEPT_FILES)
    mx.save_safetensors(str(out / "model.safetensors"), out_weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(
        json.dumps({"eos_token_id": config["eos_token_id"], "do_sample": False}, indent=2) + "\n"
    )
    for name, blob in tokenizer_files.items():
        (out / name).write_bytes(blob)
    return out


def mlx_logits(checkpoint: Path, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mlx-vlm's body logits and MTP-head logits (two tokens ahead) for each row of ``ids``."""
    import mlx.core as mx
    from mlx_vlm import load
    from mlx_vlm.speculative.drafters import load_drafter

    from engines.mlx.qwen35 import forward_hidden
    from engines.mlx.widening import widen_to_declared

    config = json.loads((checkpoint / "config.json").read_text())
    model = load(str(checkpoint))[0]
    drafter, kind = load_drafter(str(checkpoint))
    if kind != "mtp":
        raise ValueError(f"load_drafter found a {kind} drafter, not the bundled MTP head")
    widen_to_declared(model, config)
    widen_to_declared(drafter, config)
    drafter.bind(model)
    lm = model.language_model
    mains, mtps = [], []
    for row in ids:
        x = mx.array(row[None])
        out = lm(x, return_hidden=True)
        hidden = out.hidden_states[-1]
        embed = lm.model.embed_tokens(x[:, 1:])
        positions = mx.arange(x.shape[1] - 1)[None]
        h = forward_hidden(drafter, embed, hidden[:, :-1], None, positions)
        mains.append(np.array(out.logits[0].astype(mx.float32)))
        mtps.append(np.array(lm.model.embed_tokens.as_linear(h)[0].astype(mx.float32)))
    return np.stack(mains), np.stack(mtps)


def parity(checkpoint: Path, reference: Path) -> tuple[float, float, float]:
    """Max |logit difference| from PyTorch's for the body and the MTP head, and the body's argmax agreement."""
    ref = np.load(reference)
    main, mtp = mlx_logits(checkpoint, ref["ids"])
    main_diff = float(np.abs(main - ref["logits"]).max())
    mtp_diff = float(np.abs(mtp - ref["mtp_logits"]).max())
    same_argmax = float((main.argmax(-1) == ref["logits"].argmax(-1)).mean())
    print(f"parity ({checkpoint}): max |logit diff| body {main_diff:.2e}, MTP head {mtp_diff:.2e} "
          f"(logit scale {np.abs(ref['logits']).max():.1f}); argmax agreement {same_argmax:.1%}")
    return main_diff, mtp_diff, same_argmax


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trained", help="folder written by training.train")
    parser.add_argument("out", help="checkpoint folder to write")
    parser.add_argument("--tokenizer", required=True, help="folder with the tokenizer files")
    args = parser.parse_args()
    trained = Path(args.trained)
    weights = read_trained(trained)
    # The maths first, at full precision: MLX must compute what PyTorch computed on the same weights.
    with tempfile.TemporaryDirectory() as full:
        try:
            write_checkpoint(weights, Path(args.tokenizer), Path(full) / "float32", stored="float32")
        except ValueError as exc:
            sys.exit(f"export: {exc}")
        main_diff, mtp_diff, _ = parity(Path(full) / "float32", trained / "reference.npz")
    if max(main_diff, mtp_diff) > PARITY_TOLERANCE:
        sys.exit(f"parity failed: differences above {PARITY_TOLERANCE}")
    out = write_checkpoint(weights, Path(args.tokenizer), Path(args.out))
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"wrote {out} ({size / 1e6:.1f} MB, weights stored as {STORED_DTYPE})")
    *_, agreement = parity(out, trained / "reference.npz")
    if agreement < STORED_ARGMAX_AGREEMENT:
        sys.exit(f"the {STORED_DTYPE} weights pick another next token too often: {agreement:.1%} agreement")


if __name__ == "__main__":
    main()
