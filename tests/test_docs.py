"""The docs cannot drift from the code: every frame type, REST route, CLI flag and setting the code has is
documented in docs/, in a table with one row per item, and every such row names something the code has.
Relative links in the README and docs/ resolve."""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path
from typing import get_args

import pytest

from engines.fake import FakeEngine
from engines.options import GenerationOptions
from webapp import cli, create_app
from webapp.web import protocol

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CELL = re.compile(r"`([^`]+)`")


def section(path: Path, heading: str) -> str:
    """The text under the Markdown heading ``heading`` (its exact text), up to the next heading of its level
    or above."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"(#+) (.*)", line)
        if match and match.group(2).strip() == heading:
            level = len(match.group(1))
            body = []
            for line in lines[i + 1:]:
                other = re.match(r"(#+) ", line)
                if other and len(other.group(1)) <= level:
                    break
                body.append(line)
            return "\n".join(body)
    raise AssertionError(f"{path.relative_to(ROOT)} has no heading {heading!r}: the docs test reads its table there")


def rows(text: str) -> list[list[str]]:
    """The body rows of the Markdown tables in ``text``, as lists of cells (header and rule rows left out; a
    cell may hold ``\\|``)."""
    found, in_table = [], False
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            in_table = False
        elif not in_table:
            in_table = True  # its header row
        elif not re.fullmatch(r"\|[\s:|-]+\|", line):
            found.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))])
    return found


def table(path: Path, heading: str) -> dict[str, list[str]]:
    """The rows of the tables under ``heading``, keyed by the first backticked name of their first cell."""
    keyed = {}
    for cells in rows(section(path, heading)):
        names = CELL.findall(cells[0])
        if names:
            keyed[names[0]] = cells
    return keyed


# Frame types -------------------------------------------------------------------------------------------------

def client_frames() -> dict[str, set[str]]:
    """Each client frame type and its fields, from the frame models protocol.parse accepts."""
    union = get_args(protocol.ClientFrame)[0]  # Annotated[Union[...], discriminator]
    frames = {}
    for model in get_args(union):
        (kind,) = get_args(model.model_fields["type"].annotation)
        frames[kind] = set(model.model_fields) - {"type"}
    return frames


def _frame_types(value: ast.expr) -> list[str]:
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    if isinstance(value, ast.IfExp):
        return _frame_types(value.body) + _frame_types(value.orelse)
    return []


def _kinds(node: ast.Dict) -> list[str]:
    return [kind for key, value in zip(node.keys, node.values)
            if isinstance(key, ast.Constant) and key.value == "type" for kind in _frame_types(value)]


def _own_nodes(function: ast.AST):
    """The nodes of a function's body, not those of functions defined inside it."""
    for child in ast.iter_child_nodes(function):
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield child
            yield from _own_nodes(child)


def server_frames() -> dict[str, set[str]]:
    """Each frame type the server sends and the fields the code names for it: dict literals with a ``type``
    key in webapp/, plus ``frame["field"] = …`` on a variable holding one, in the same function."""
    frames: dict[str, set[str]] = {}
    for path in sorted((ROOT / "webapp").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                for kind in _kinds(node):
                    frames.setdefault(kind, set()).update(keys - {"type"})
        for function in ast.walk(tree):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            holding: dict[str, list[str]] = {}
            for node in _own_nodes(function):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and _kinds(node.value):
                    holding.update({t.id: _kinds(node.value) for t in node.targets if isinstance(t, ast.Name)})
            for node in _own_nodes(function):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        if (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                                and target.value.id in holding and isinstance(target.slice, ast.Constant)):
                            for kind in holding[target.value.id]:
                                frames[kind].add(target.slice.value)
    return frames


def test_the_code_finds_the_frames_it_sends():
    """The AST reading above still sees the frames (a refactor that hides them would make the next tests vacuous)."""
    sent = server_frames()
    for kind in ("hello", "start", "answer", "thinking", "stats", "done", "error", "race_done", "sweep_done"):
        assert kind in sent, f"no server frame {kind!r} found in webapp/: update server_frames() in this test"
    assert {"chat", "stop", "race", "sweep"} <= set(client_frames())


@pytest.mark.parametrize("direction, frames", [("Client → server frames", client_frames),
                                               ("Server → client frames", server_frames)])
def test_every_frame_type_and_field_is_documented(direction, frames):
    documented, problems = table(DOCS / "protocol.md", direction), []
    for kind, fields in sorted(frames().items()):
        if kind not in documented:
            problems.append(f"frame type {kind!r} ({direction.lower()}) is not documented: add a row for it to the "
                            f"table under '## {direction}' in docs/protocol.md")
            continue
        missing = sorted(fields - set(CELL.findall(" ".join(documented[kind][1:]))))
        if missing:
            problems.append(f"frame {kind!r} has fields {missing} that its row under '## {direction}' in "
                            f"docs/protocol.md does not name: add them (backticked) to its fields")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("direction, frames", [("Client → server frames", client_frames),
                                               ("Server → client frames", server_frames)])
def test_every_documented_frame_type_exists(direction, frames):
    stale = sorted(set(table(DOCS / "protocol.md", direction)) - set(frames()))
    assert not stale, (f"docs/protocol.md documents {direction.lower()} {stale} that the code does not have: remove "
                       f"their rows under '## {direction}', or rename them to what the code sends")


# REST routes -------------------------------------------------------------------------------------------------

def api_routes() -> set[tuple[str, str]]:
    app = create_app(FakeEngine())
    return {(method, rule.rule) for rule in app.url_map.iter_rules() if rule.rule.startswith(("/api", "/v1"))
            for method in rule.methods - {"HEAD", "OPTIONS"}}


def documented_routes() -> set[tuple[str, str]]:
    found = set()
    tables = rows(section(DOCS / "protocol.md", "REST routes")) + rows(section(DOCS / "openai-api.md", "Routes"))
    for cells in tables:
        method, path = (CELL.findall(cell) for cell in cells[:2])
        if method and path:
            found.add((method[0], path[0]))
    return found


def test_every_rest_route_is_documented():
    missing = sorted(api_routes() - documented_routes())
    assert not missing, (f"REST routes {missing} are not documented: add a row (`METHOD` | `/api/…` | what it does) "
                         f"to the table under '## REST routes' in docs/protocol.md")


def test_every_openai_request_field_is_documented():
    from webapp.openai_api.requests import ChatCompletionBody

    named = {name for cells in rows(section(DOCS / "openai-api.md", "Request")) for name in CELL.findall(cells[0])}
    missing = sorted(set(ChatCompletionBody.model_fields) - named)
    stale = sorted(named - set(ChatCompletionBody.model_fields))
    assert not missing, f"request fields {missing} are not in docs/openai-api.md: add them to the table under '## Request'"
    assert not stale, f"docs/openai-api.md's '## Request' names {stale}, which the API does not take: remove them"


def test_every_documented_rest_route_exists():
    stale = sorted(documented_routes() - api_routes())
    assert not stale, (f"docs/protocol.md documents REST routes {stale} that the app does not serve: remove their rows "
                       f"under '## REST routes', or correct the method or path (Flask's form, e.g. /api/receipts/<id>)")


# CLI flags ---------------------------------------------------------------------------------------------------

class _Parsed(Exception):
    """Raised instead of parsing, carrying the parser a command built."""


def parser_for(argv: list[str], monkeypatch) -> argparse.ArgumentParser:
    """The parser ``specchat ARGV`` builds: each command builds its own when it runs, so run it until it parses."""
    def capture(self, *args, **kwargs):
        raise _Parsed(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
        try:
            cli.main(argv)
        except _Parsed as parsed:
            return parsed.args[0]
    raise AssertionError(f"specchat {' '.join(argv)} returned without parsing its arguments")


def commands(monkeypatch) -> dict[str, argparse.ArgumentParser]:
    """``specchat`` and each subcommand (``specchat bench``, …), by the program name its parser prints."""
    main = parser_for([], monkeypatch)
    found = {main.prog: main}
    # Words cli.py dispatches on, the names of parsers anywhere in webapp/, and the documented commands.
    candidates = set(re.findall(r'"([a-z][a-z-]*)"', Path(cli.__file__).read_text()))
    for path in (ROOT / "webapp").rglob("*.py"):
        candidates |= set(re.findall(r'prog="specchat ([a-z][a-z-]*)"', path.read_text()))
    candidates |= {name.split(" ", 1)[1] for name in documented_commands() if " " in name}
    for name in sorted(candidates):
        parser = parser_for([name], monkeypatch)
        if parser.prog != main.prog:
            found[parser.prog] = parser
    for parser in list(found.values()):  # argparse subcommands, should any command use them
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                found.update({sub.prog: sub for sub in action.choices.values()})
    return found


def flags(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings
            if option.startswith("--") and option != "--help"}


def documented_commands() -> list[str]:
    return re.findall(r"^## `(specchat[a-z -]*)`$", (DOCS / "cli.md").read_text(), re.M)


def documented_flags(command: str) -> set[str]:
    return {m.group(1) for cells in rows(section(DOCS / "cli.md", f"`{command}`"))
            for m in [re.match(r"`(--[a-z0-9-]+)", cells[0])] if m}


def test_every_command_is_documented(monkeypatch):
    missing = sorted(set(commands(monkeypatch)) - set(documented_commands()))
    assert not missing, (f"commands {missing} are not documented: add a '## `COMMAND`' section with a table of its "
                         f"flags to docs/cli.md")


def test_every_documented_command_exists(monkeypatch):
    stale = sorted(set(documented_commands()) - set(commands(monkeypatch)))
    assert not stale, f"docs/cli.md documents commands {stale} that specchat does not have: remove their sections"


def test_every_flag_is_documented_and_every_documented_flag_exists(monkeypatch):
    problems = []
    for command, parser in sorted(commands(monkeypatch).items()):
        have, documented = flags(parser), documented_flags(command)
        missing, stale = sorted(have - documented), sorted(documented - have)
        if missing:
            problems.append(f"`{command}` flags {missing} are not documented: add a row (`--flag VALUE` | default | "
                            f"meaning) to the table under '## `{command}`' in docs/cli.md")
        if stale:
            problems.append(f"docs/cli.md documents `{command}` flags {stale} that it does not take: remove their "
                            f"rows under '## `{command}`'")
    assert not problems, "\n".join(problems)


# Settings ----------------------------------------------------------------------------------------------------

def _number(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def test_every_setting_is_documented_with_its_range_and_default():
    documented, problems = table(DOCS / "settings.md", "Every setting"), []
    for name, field in GenerationOptions.model_fields.items():
        if name not in documented:
            problems.append(f"setting {name!r} is not documented: add a row (`{name}` | range | default | meaning) "
                            f"to the table under '## Every setting' in docs/settings.md")
            continue
        _, allowed, default, *_ = documented[name]
        if f"`{json.dumps(field.default)}`" not in default:
            problems.append(f"docs/settings.md gives {name!r} the default {default!r}; the code's is "
                            f"`{json.dumps(field.default)}` (engines/options.py)")
        bounds = [_number(getattr(m, attr)) for m in field.metadata for attr in ("ge", "gt", "le", "lt", "max_length")
                  if getattr(m, attr, None) is not None]
        bounds += [choice for choice in get_args(field.annotation) if isinstance(choice, str)]
        problems += [f"the range of {name!r} in docs/settings.md ({allowed!r}) lacks {bound}, a bound in "
                     f"engines/options.py" for bound in bounds if bound not in allowed]
    assert not problems, "\n".join(problems)


def test_every_documented_setting_exists():
    stale = sorted(set(table(DOCS / "settings.md", "Every setting")) - set(GenerationOptions.model_fields))
    assert not stale, (f"docs/settings.md documents settings {stale} that engines/options.py does not have: remove "
                       f"their rows under '## Every setting'")


# Links -------------------------------------------------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", sorted([ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md",
                                         *DOCS.glob("*.md")]), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"{page.relative_to(ROOT)} links to {target}, which does not exist: fix the link"


# Results -----------------------------------------------------------------------------------------------------

def test_every_current_number_has_its_log_entry():
    """RESULTS.md's promise: each current number's date and commit head an entry of the log below, which says how it
    was measured."""
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    start = text.index("\n## Current numbers\n")
    end = text.index("\n## 20", start)  # the log's first entry
    current, log = text[start:end], text[end:]
    cells = re.findall(r"\| (\d{4}-\d\d-\d\d) · ([0-9a-f, ]+) \|\n", current)
    assert len(cells) >= 20, "the current numbers' table rows end in 'date · commit'"
    entries = [(date, set(re.findall(r"\b[0-9a-f]{7}\b", commits)))
               for date, commits in re.findall(r"^## (\d{4}-\d\d-\d\d) · ([^·\n]*)·", log, re.M)]
    missing = [f"{date} · {commit}" for date, commits in cells for commit in re.findall(r"[0-9a-f]{7}", commits)
               if not any(date == day and commit in heads for day, heads in entries)]
    assert not missing, f"current numbers without a log entry of the same date and commit: {missing}"
