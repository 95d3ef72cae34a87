"""Decode tok/s with each system BLAS preloaded (OpenBLAS, BLIS) ÷ with the mlx wheel's bundled BLAS,
side by side in one run, the libraries' runs interleaved.

    python -m benchmarks.blas [--model DIR] [--rounds N] [--tokens N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from webapp.blas import ENV, find_blis, find_openblas


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
    libraries = {"OpenBLAS": find_openblas("auto"), "BLIS": find_blis(), "bundled": None}
    libraries = {name: path for name, path in libraries.items() if path or name == "bundled"}
    if len(libraries) == 1:
        sys.exit("no system BLAS found: install libopenblas0-pthread or libblis4-pthread (Debian/Ubuntu) first")
    if args.model is None:
        from demo_model import DEFAULT_MODEL

        args.model = str(DEFAULT_MODEL)
    extra = ["--tokens", str(args.tokens)]
    runs: dict[str, list[dict]] = {name: [] for name in libraries}
    for _ in range(args.rounds):
        for name, path in libraries.items():
            runs[name].append(run(args.model, path, extra))
    rates = {name: statistics.median(r["tok_s"] for r in results) for name, results in runs.items()}
    reference = runs["bundled"]
    print(f"model: {args.model}; median of {args.rounds} interleaved runs, {args.tokens} greedy tokens")
    for name, results in runs.items():
        identical = all(a["tokens"] == b["tokens"] for a, b in zip(results, reference))
        print(f"{name}: {results[0]['blas']}")
        print(f"  decode {rates[name]:.1f} tok/s, {rates[name] / rates['bundled']:.2f}x the bundled BLAS; "
              f"greedy output identical to it: {identical}")
    if "OpenBLAS" in rates and "BLIS" in rates:
        print(f"BLIS ÷ OpenBLAS: {rates['BLIS'] / rates['OpenBLAS']:.2f}")
    print(f"specchat itself preloads OpenBLAS when it is installed; --blas bundled (or {ENV}=bundled) turns that off")


if __name__ == "__main__":
    main()
