"""Protocol fuzz, the long run: tests/support/fuzz.py's hypothesis frames against a real server, fake engine
and MLX engine, thousands of frames each (tests/test_fuzz.py runs a few hundred).

    python -m benchmarks.fuzz [--frames N] [--engines fake,mlx] [--model DIR]

Needs hypothesis (the test extra: pip install -e '.[test]').
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.support.fuzz import fuzz, tracebacks
from tests.support.harness import ServerProcess


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=6000, help="frames per engine (default 6000)")
    parser.add_argument("--engines", default="fake,mlx")
    parser.add_argument("--model", help="MLX model folder (default: a freshly built tiny qwen3_5)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="specchat-fuzz-"))
    total = 0
    for engine in args.engines.split(","):
        if engine == "mlx":
            if args.model is None:
                from demo_model.tiny import build_tiny_checkpoint

                args.model = str(build_tiny_checkpoint(work / "tiny-qwen3_5"))
            cli = ["--model", args.model]
        else:
            cli = ["--engine", engine]
        server = ServerProcess(cli, work / f"data-{engine}")
        server.wait_ready()
        start = time.perf_counter()
        try:
            fuzzer = fuzz(server, args.frames)
        finally:
            exit_code = server.stop()
        seconds = time.perf_counter() - start
        total += fuzzer.sent
        print(f"{engine}: {fuzzer.sent} frames in {seconds:.0f} s, {fuzzer.replies} replies started, every asked-for "
              f"reply ended exactly once; socket open throughout; tracebacks in the log: {len(tracebacks(server))}; "
              f"exit status {exit_code}")
        print(f"  frames: {dict(fuzzer.kinds.most_common())}")
        print(f"  error codes: {dict(fuzzer.codes.most_common())}")
        if tracebacks(server) or exit_code != 0:
            print("".join(server.lines[-80:]))
            return 1
    print(f"fuzz: {total} frames, 0 crashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
