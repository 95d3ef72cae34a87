"""Greedy tokens and decode tok/s of one model in this process (run under a chosen BLAS).

    python -m benchmarks.greedy MODEL [--tokens N] [--drafter] [--block N]

Prints one JSON line: {"blas", "tokens", "tok_s"}.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--drafter", action="store_true")
    parser.add_argument("--block", type=int, default=3)
    args = parser.parse_args()

    import mlx.core as mx
    from mlx_vlm import load, stream_generate

    from webapp.blas import blas_library

    model, processor = load(args.model)
    kwargs = {}
    if args.drafter:
        from mlx_vlm.speculative.drafters import load_drafter

        drafter, kind = load_drafter(args.model)
        kwargs = {"draft_model": drafter, "draft_kind": kind, "draft_block_size": args.block}
    tokenizer = getattr(processor, "tokenizer", processor)
    ids = tokenizer.encode("<|im_start|>user\nhello, how does the drafter work?<|im_end|>\n<|im_start|>assistant\n",
                           add_special_tokens=False)
    tokens, first, last = [], None, None
    for chunk in stream_generate(model, processor, "", input_ids=mx.array([ids]), max_tokens=args.tokens,
                                 temperature=0.0, **kwargs):
        if chunk.finish_reason is not None:
            break
        last = time.perf_counter()
        first = first or last
        tokens.append(int(chunk.token))
    print(json.dumps({"blas": blas_library(), "tokens": tokens, "tok_s": (len(tokens) - 1) / (last - first)}))


if __name__ == "__main__":
    main()
