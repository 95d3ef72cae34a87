"""The command line's argument errors: one line, status 2, never a traceback or a silent fallback."""

import subprocess
import sys

import pytest

from webapp import ROOT



def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webapp", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env=env)


@pytest.mark.parametrize("args, words", [
    (["--log-level", "bogus"], "--log-level"),
    (["--port", "-1"], "--port"),
    (["--port", "70000"], "--port"),
    (["--port", "http"], "--port"),
    (["--blas", "/no/such/libopenblas.so"], "/no/such/libopenblas.so is not a file"),
    (["bench", "--blas", "/no/such/libopenblas.so"], "/no/such/libopenblas.so is not a file"),
])
def test_bad_argument_is_one_line_and_status_2(tmp_path, args, words):
    result = run_cli(*args, *([] if args[0] == "bench" else ["--data-dir", str(tmp_path)]))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("specchat") and words in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("command", [[], ["bench"]])
def test_a_missing_blas_library_named_in_the_environment_is_refused(tmp_path, command):
    import os

    env = dict(os.environ, SPECCHAT_BLAS="/no/such/libopenblas.so")
    result = run_cli(*(command or ["--data-dir", str(tmp_path)]), env=env)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "/no/such/libopenblas.so is not a file" in lines[0]


def test_log_level_in_any_case(tmp_path):
    from webapp.cli import parse_args

    assert parse_args(["--log-level", "debug"]).log_level == "DEBUG"
    assert parse_args(["--port", "0"]).port == 0 and parse_args(["--port", "65535"]).port == 65535


def test_a_database_from_a_newer_specchat_is_refused_in_one_line(tmp_path):
    import sqlite3

    from webapp.conversations.store import MIGRATIONS

    db = sqlite3.connect(tmp_path / "specchat.db")
    db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 3}")
    db.commit()
    db.close()
    result = run_cli("--engine", "fake", "--port", "0", "--data-dir", str(tmp_path))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "newer specchat" in lines[0], result.stderr


@pytest.mark.parametrize("command, flag", [(["--drafter"], "--drafter"), (["drafter", "--for"], "--for")])
def test_a_missing_drafter_or_model_folder_names_the_option_it_came_from(tmp_path, command, flag):
    result = run_cli(*command, str(tmp_path / "missing"), "--data-dir", str(tmp_path))
    lines = result.stderr.strip().splitlines()
    assert result.returncode in (1, 2) and len(lines) == 1, result.stderr
    assert f"Pass {flag} " in lines[0] and "--model" not in lines[0], lines[0]


def test_help_lists_the_commands_with_a_line_each():
    import re

    result = run_cli("--help")
    assert result.returncode == 0
    for name in ("bench", "drafter"):
        assert re.search(rf"^  {name} +\w+ \w+", result.stdout, re.M), result.stdout


@pytest.mark.parametrize("command", [[], ["bench"], ["drafter"]])
def test_every_option_says_what_it_does(command):
    import re

    text = run_cli(*command, "--help").stdout
    entries: list[list[str]] = []  # an option's lines: the one naming it, then its wrapped description
    for line in re.split(r"^options:$", text, flags=re.M)[1].splitlines():
        if line.startswith("  -"):
            entries.append([line])
        elif entries and line.startswith("   "):
            entries[-1].append(line)
    assert len(entries) > 5
    undescribed = [e[0].strip() for e in entries if len(e) == 1 and not re.search(r"\S {2,}\S", e[0].strip())]
    assert undescribed == [], undescribed
