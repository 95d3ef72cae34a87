"""Decode tok/s with OpenBLAS preloaded ÷ with the mlx wheel's bundled BLAS, side by side in one run.

    python -m benchmarks.blas [--model DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from webapp.blas import find_openblas


def run(model: str, preload: str | None, extra: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    out = subprocess.run([sys.executable, "-m", "benchmarks.greedy", model, *extra], env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the bundled demo model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    library = find_openblas("auto")
    if library is None:
        sys.exit("no OpenBLAS found: install libopenblas0-pthread (Debian/Ubuntu) first")
    if args.model is None:
        from demo_model import DEFAULT_MODEL

        args.model = str(DEFAULT_MODEL)
    extra = ["--tokens", str(args.tokens)]
    fast, slow = [], []
    for _ in range(args.rounds):
        fast.append(run(args.model, library, extra))
        slow.append(run(args.model, None, extra))
    identical = all(f["tokens"] == s["tokens"] for f, s in zip(fast, slow))
    f, s = statistics.median(r["tok_s"] for r in fast), statistics.median(r["tok_s"] for r in slow)
    print(f"model: {args.model}")
    print(f"OpenBLAS: {fast[0]['blas']}")
    print(f"bundled:  {slow[0]['blas']}")
    print(f"decode tok/s: OpenBLAS {f:.1f}, bundled {s:.1f}, ratio {f / s:.2f} "
          f"(median of {args.rounds} interleaved runs, {args.tokens} greedy tokens); "
          f"greedy output identical: {identical}")


if __name__ == "__main__":
    main()
