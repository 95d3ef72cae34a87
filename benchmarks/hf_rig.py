"""A full-acceptance rig rewritten to the Hugging Face layout, so that ``mlx_vlm.convert`` quantizes it the way
users' checkpoints are quantized.

    python -m benchmarks.hf_rig RIG OUT [--shards 3]

RIG is a folder ``python -m demo_model.rig`` wrote (MLX layout); OUT gets the same weights as Qwen publishes
them (demo_model/hf_layout.py: ``model.language_model.*``, ``model.visual.*``, ``mtp.*``, zero-centred norms,
``conv1d.weight`` as (C, 1, K), text ``model_type`` ``qwen3_5_text``, sharded with an index) beside the rig's
tokenizer and chat template. Then, for example,
``python -m mlx_vlm.convert --hf-path OUT --mlx-path Q4 --mtp -q --q-bits 4 --q-group-size 64`` writes the body
to Q4 and the head to Q4-mtp.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

KEPT = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json")


def rewrite(rig: Path, out: Path, shards: int = 3) -> Path:
    import mlx.core as mx

    from demo_model.hf_layout import README, hf_config, hf_weights, shard_plan

    config = json.loads((rig / "config.json").read_text())
    weights = mx.load(str(rig / "model.safetensors"))
    dtypes = {str(v.dtype).removeprefix("mlx.core.") for k, v in weights.items() if k.startswith("language_model.")}
    if len(dtypes) != 1:
        raise SystemExit(f"{rig}: the body mixes dtypes {sorted(dtypes)}")
    out.mkdir(parents=True)
    tensors = hf_weights(weights, vision=any(k.startswith("vision_tower.") for k in weights))
    plan = shard_plan(list(tensors), shards)
    for name in sorted(set(plan.values())):
        mx.save_safetensors(str(out / name), {k: v for k, v in tensors.items() if plan[k] == name},
                            metadata={"format": "pt"})
    index = {"metadata": {"total_size": sum(v.nbytes for v in tensors.values())},
             "weight_map": dict(sorted(plan.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    (out / "config.json").write_text(json.dumps(hf_config(config, dtypes.pop()), indent=2))
    card = README.split("\n\n")[0]  # the model card's front matter
    (out / "README.md").write_text(card + "\n\nA full-acceptance rig in Hugging Face layout, for benchmarks.\n")
    for name in KEPT:
        if (rig / name).exists():
            shutil.copy(rig / name, out / name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rig", type=Path)
    parser.add_argument("output", type=Path, help="new folder to write the checkpoint to")
    parser.add_argument("--shards", type=int, default=3)
    args = parser.parse_args()
    print(rewrite(args.rig, args.output, args.shards))


if __name__ == "__main__":
    main()
