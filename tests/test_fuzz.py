"""Protocol fuzz, the short run (python -m benchmarks.fuzz runs thousands of frames): hypothesis frames over
a real socket to a real server, fake engine and MLX on the tiny model."""

import pytest

from tests.support.fuzz import fuzz, tracebacks
from tests.support.harness import get_json


@pytest.mark.parametrize("engine", ["fake", "mlx"])
def test_fuzzed_frames_break_nothing(start_server, tiny_model, engine):
    server = start_server(*(["--engine", "fake"] if engine == "fake" else ["--model", str(tiny_model)]))
    server.wait_ready()
    fuzzer = fuzz(server, 400 if engine == "fake" else 250)  # raises on the first broken promise
    assert fuzzer.sent >= 250 and fuzzer.replies > 0 and sum(fuzzer.codes.values()) > 0
    assert get_json(server.url + "/api/health")["engine"]["name"] == engine  # no fuzzed frame switched it
    assert server.stop() == 0
    assert tracebacks(server) == [], "".join(server.lines[-60:])
