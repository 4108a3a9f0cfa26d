"""The README cannot drift: its walk-throughs (the curl one and the `hinge` one) run as
written against a live service (a real API server and a real Celery worker on SQLite in
a temporary HINGE_HOME), and every output the README shows is checked against the real
one: keys, types, fixed values and the numbers to the digits shown.

How a block is read (README.md says so above the curl block):
- a command is a line that is not a comment, with its `\\` continuation lines; the comment
  lines right below it are the output it shows (an aside in parentheses is not);
- in a shown output `…` stands for anything (a value, more keys, more elements, the rest
  of a text); a string `"abcd…"` or a text `abcd…` made of hex digits is an id;
- `NAME=abcd…` takes the id the closest output above it shows as `abcd…` (found in the
  real output at the same key, or the same place in the text), `NAME=hk_…` the API key;
- the blocks run in a new folder with `.venv/bin/hinge` (the console script) in it, and
  with HINGE_PORT set to the live server's port: the README sets HINGE_URL from it, as a
  user's shell would from `make run`'s HINGE_PORT, and nothing else names an address. The
  data are what `hinge sample` writes: nothing from ../shared (a user's clone has none).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from solvers.backbone import PROGRESS_INTERVAL_S
from tests.e2e.hinge_cli import cli_env, hinge_bin_dir
from tests.support import REPO, SharedService

ANY = "\x00ANY"
README = REPO / "README.md"
ID_TEXT = re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{4,}…")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# -- reading the README ---------------------------------------------------------------

def section_block(title: str) -> str:
    """The first ```sh block of the README section `## title`."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else None]
    match = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert match, f"no sh block in {title!r}"
    return match.group(1)


@dataclass
class Step:
    command: str
    shown: list[str] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""


def steps(block: str) -> list[Step]:
    lines = block.splitlines()
    found: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        command = [line]
        while command[-1].rstrip().endswith("\\"):
            i += 1
            command.append(lines[i])
        i += 1
        step = Step("\n".join(command))
        while i < len(lines) and lines[i].startswith("#"):
            text = lines[i][1:].removeprefix(" ")
            if not text.startswith("("):
                step.shown.append(text)
            i += 1
        found.append(step)
    return found


def shown_json(text: str) -> Any:
    """The README's abbreviated JSON as a value: `…` as a value or an element is ANY, as
    a member of an object it is dropped (extra keys are always allowed)."""
    out: list[str] = []
    stack: list[str] = []
    expecting_key = False
    in_string = escaped = False
    i = 0
    while i < len(text):
        char = text[i]
        i += 1
        if in_string:
            out.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
            expecting_key = char == "{"
        elif char in "}]":
            stack.pop()
            expecting_key = False
        elif char == ",":
            expecting_key = bool(stack) and stack[-1] == "{"
        elif char == ":":
            expecting_key = False
        elif char == "…":
            if stack and stack[-1] == "{" and expecting_key:
                while out and out[-1] in " \n,":
                    out.pop()
                while i < len(text) and text[i] in " \n":
                    i += 1
                if i < len(text) and text[i] == ",":
                    i += 1
                continue
            out.append(json.dumps(ANY))
            continue
        out.append(char)
    return json.loads("".join(out))


# -- comparing ----------------------------------------------------------------------------

def _decimals(number: float) -> int:
    text = repr(number)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


def check_value(real: Any, shown: Any, where: str = "$") -> None:
    """`real` has everything `shown` shows: keys, types, fixed values, numbers to the
    digits shown."""
    if shown == ANY:
        return
    key = where.rsplit(".", 1)[-1]
    if isinstance(shown, dict):
        assert isinstance(real, dict), f"{where}: {real!r} is not an object"
        for name, value in shown.items():
            assert name in real, f"{where}: no key {name!r} in {sorted(real)}"
            check_value(real[name], value, f"{where}.{name}")
    elif isinstance(shown, list):
        assert isinstance(real, list), f"{where}: {real!r} is not a list"
        known = shown[:shown.index(ANY)] if ANY in shown else shown
        if ANY in shown:
            assert len(real) >= len(known), f"{where}: {real!r} shorter than {shown!r}"
        else:
            assert len(real) == len(shown), f"{where}: {real!r} is not like {shown!r}"
        for index, value in enumerate(known):
            check_value(real[index], value, f"{where}[{index}]")
    elif isinstance(shown, str) and "…" in shown:
        assert isinstance(real, str), f"{where}: {real!r} is not a string"
        if key == "id" or key.endswith("_id"):
            assert re.fullmatch(r"[0-9a-f]{32}", real), f"{where}: {real!r} is not an id"
        else:
            assert real.startswith(shown.split("…")[0]), f"{where}: {real!r} vs {shown!r}"
    elif isinstance(shown, bool) or shown is None or isinstance(shown, str):
        assert real == shown, f"{where}: {real!r}, the README shows {shown!r}"
    else:
        assert isinstance(real, int | float) and not isinstance(real, bool), \
            f"{where}: {real!r} is not a number"
        tolerance = 0.5 * 10 ** -_decimals(shown) if isinstance(shown, float) else 0
        assert math.isclose(real, shown, abs_tol=tolerance * 1.0001), \
            f"{where}: {real!r}, the README shows {shown!r}"


def plausible(real: Any) -> None:
    """What any answer of these kinds must satisfy, whatever the README shows."""
    if not isinstance(real, dict):
        return
    if {"labels", "decision_values", "classes"} <= real.keys() and len(real["classes"]) == 2:
        assert len(real["labels"]) == len(real["decision_values"]) >= 1
        for label, value in zip(real["labels"], real["decision_values"], strict=True):
            assert label == real["classes"][1 if value > 0 else 0], real
    result = real.get("result")
    if real.get("status") == "succeeded" and isinstance(result, dict) and "tol" in result:
        assert real["model_id"] and result["exit_reason"] == "converged"
        assert result["converged"] is True and 0 <= result["relative_gap"] <= result["tol"]
        assert result["primal_objective"] >= result["dual_objective"]
        assert 0.5 < result["train_accuracy"] <= 1.0


def sse_events(text: str) -> list[tuple[int | None, str, dict]]:
    events = []
    for chunk in re.split(r"\r?\n\r?\n", text.strip()):
        fields: dict[str, str] = {}
        for line in chunk.splitlines():
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            fields[name] = value.strip()
        if "data" in fields:
            ident = fields.get("id")
            events.append((int(ident) if ident else None, fields.get("event", "message"),
                           json.loads(fields["data"])))
    return events


def check_sse(real_text: str, shown: list[str]) -> None:
    real = sse_events(real_text)
    assert real and real[-1][1] == "status", real_text[-2000:]
    seqs = [data["seq"] for _, _, data in real if "seq" in data and _ is not None]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    blocks: list[list[str]] = [[]]
    for line in shown:
        if not line.strip() or line.strip() == "…":
            blocks.append([])
        else:
            blocks[-1].append(line)
    for block in filter(None, blocks):
        kind = next(line.split(":", 1)[1].strip() for line in block
                    if line.startswith("event:"))
        data_lines = [line for line in block if not re.match(r"(id|event):", line)]
        data = shown_json(" ".join(data_lines).split(":", 1)[1])
        candidates = [d for _, k, d in real if k == kind
                      and (data.get("status") in (None, ANY) or d.get("status") == data["status"])]
        if kind == "progress" and not candidates:
            # as the README says: progress comes at most every PROGRESS_INTERVAL_S, so a job
            # that trains for less than that may end before its first progress event
            result = real[-1][2].get("result") or {}
            seconds = result.get("train_seconds", math.inf)
            assert seconds < 2 * PROGRESS_INTERVAL_S, real_text[-2000:]
            continue
        assert candidates, f"no {kind} event like {data} in:\n{real_text[-2000:]}"
        errors = []
        for candidate in candidates:
            try:
                check_value(candidate, data)
                break
            except AssertionError as exc:
                errors.append(str(exc))
        else:
            raise AssertionError(f"no {kind} event matches {data}: {errors[:3]}")


def line_pattern(line: str, capture: str | None = None) -> re.Pattern[str]:
    """A shown text line as a regex: ids and `…` match anything of their kind, runs of
    spaces any spacing, a progress bar any bar."""
    parts: list[str] = []
    position = 0
    for match in re.finditer(r"(?=[0-9a-f]*[a-f])\b[0-9a-f]{4,}…|…|━+|\s+", line):
        parts.append(re.escape(line[position:match.start()]))
        token = match.group(0)
        if token.endswith("…") and len(token) > 1:
            parts.append("([0-9a-f]{32})" if token == capture else "[0-9a-f]{32}")
        elif token == "…":
            parts.append(".*?")
        elif token.startswith("━"):
            parts.append("[━╺╸ ]*")
        else:
            parts.append(r"\s+")
        position = match.end()
    parts.append(re.escape(line[position:]))
    return re.compile("".join(parts))


def check_text(real_text: str, shown: list[str]) -> None:
    lines = ANSI.sub("", real_text).splitlines()
    for wanted in shown:
        pattern = line_pattern(wanted)
        assert any(pattern.search(line) for line in lines), \
            f"README shows {wanted!r}; the real output is:\n{real_text[-3000:]}"


def check_output(step: Step) -> None:
    if not step.shown:
        return
    first = step.shown[0].lstrip()
    if first.startswith("{"):
        real = json.loads(step.stdout)
        check_value(real, shown_json("\n".join(step.shown)))
        plausible(real)
    elif first.startswith(("id:", "event:")):
        check_sse(step.stdout, step.shown)
    else:
        check_text(step.stdout + "\n" + step.stderr, step.shown)


# -- placeholders ---------------------------------------------------------------------------

def _find_key(value: Any, key: str) -> Iterator[Any]:
    if isinstance(value, dict):
        if key in value:
            yield value[key]
        for item in value.values():
            yield from _find_key(item, key)
    elif isinstance(value, list):
        for item in value:
            yield from _find_key(item, key)


def placeholder_value(token: str, done: list[Step], key: str) -> str:
    """The real value of `abcd…`: the id at the place the closest output above shows it."""
    if token.startswith("hk_"):
        return key
    for step in reversed(done):
        text = "\n".join(step.shown)
        if token not in text:
            continue
        named = re.search(r'"(\w+)":\s*"' + re.escape(token), text)
        if named:
            if text.lstrip().startswith(("id:", "event:")):
                reals: list[Any] = [d for _, _, d in sse_events(step.stdout)]
            else:
                reals = [json.loads(step.stdout)]
            found = [v for real in reals for v in _find_key(real, named.group(1))
                     if isinstance(v, str) and re.fullmatch(r"[0-9a-f]{32}", v)]
            assert found, f"no {named.group(1)} in the output of {step.command!r}"
            return str(found[0])
        line = next(line for line in step.shown if token in line)
        pattern = line_pattern(line, capture=token)
        for real_line in ANSI.sub("", step.stdout + "\n" + step.stderr).splitlines():
            match = pattern.search(real_line)
            if match:
                return match.group(1)
        raise AssertionError(f"{line!r} not in the output of {step.command!r}")
    raise AssertionError(f"no output above shows {token!r}")


# -- running ------------------------------------------------------------------------------

ASSIGNMENT = re.compile(r"^(export )?([A-Z_]+)=(\S+)")


def run_walkthrough(title: str, base: str, key: str, cwd: Path, env: dict[str, str]
                    ) -> list[Step]:
    done: list[Step] = []
    prelude: list[str] = []
    for step in steps(section_block(title)):
        command = step.command
        assignment = ASSIGNMENT.match(command)
        if assignment and "\n" not in command:
            name, value = assignment.group(2), assignment.group(3)
            if "…" in value:
                real = placeholder_value(value.split("#")[0].strip(), done, key)
                prelude.append(f"export {name}='{real}'")
            else:
                prelude.append(f"export {command.split('#')[0].strip().removeprefix('export ')}")
            continue
        script = "\n".join([*prelude, command])
        finished = subprocess.run(["bash", "-c", script], cwd=cwd, env=env,
                                  capture_output=True, text=True, timeout=300)
        assert finished.returncode == 0, (step.command, finished.stdout, finished.stderr)
        step.stdout, step.stderr = finished.stdout, finished.stderr
        check_output(step)
        done.append(step)
    return done


@pytest.fixture
def service(shared_service: SharedService) -> Iterator[httpx.Client]:
    """The shared service (tests/e2e/conftest.py), as a new tenant: a walkthrough sees what
    a first user of a fresh service sees."""
    with shared_service.tenant() as client:
        yield client


def _live(service: httpx.Client) -> tuple[str, str]:
    return (str(service.base_url).rstrip("/"),
            service.headers["Authorization"].removeprefix("Bearer "))


def _user_folder(tmp_path: Path, base: str, key: str) -> tuple[Path, dict[str, str]]:
    """A folder like a checkout after `make run` (`.venv/bin/hinge`), and a shell that
    knows only HINGE_PORT (the live server's port): no HINGE_URL, no ../shared."""
    bin_dir = hinge_bin_dir(tmp_path)
    venv_bin = tmp_path / "user" / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    shutil.copy(bin_dir / "hinge", venv_bin / "hinge")
    env = cli_env(base, key, bin_dir)
    env.pop("HINGE_URL")
    env["HINGE_PORT"] = base.rsplit(":", 1)[1]
    env["HINGE_SHARED_DATA"] = os.devnull  # nothing may read the shared data sets
    return tmp_path / "user", env


def _one_address(title: str) -> None:
    """Every command takes the address from $HINGE_URL: no other address is written."""
    block = section_block(title)
    assert "../shared" not in block and "a9a.xz" not in block
    for step in steps(block):
        literal = re.findall(r"https?://[^\s\"']+", step.command)
        assert all(url == "http://127.0.0.1:${HINGE_PORT:-8000}" for url in literal), step
        assert "/v1/" not in step.command or "$HINGE_URL/v1/" in step.command, step


def test_the_curl_walkthrough_runs_as_written(service: httpx.Client, tmp_path: Path) -> None:
    base, key = _live(service)
    _one_address("Walk-through with curl")
    cwd, env = _user_folder(tmp_path, base, key)
    done = run_walkthrough("Walk-through with curl", base, key, cwd, env)
    commands = " ".join(step.command for step in done)
    for route in ("/v1/datasets", "/v1/jobs", "/events", "/cancel", "/predict", "/export"):
        assert route in commands
    assert "hinge sample" in commands
    assert sum(1 for step in done if step.shown) >= 8
    assert (cwd / "sample.model").read_text().startswith("solver_type L2R_L1LOSS_SVC_DUAL")


def test_the_cli_walkthrough_runs_as_written(service: httpx.Client, tmp_path: Path) -> None:
    base, key = _live(service)
    _one_address("The `hinge` command line")
    cwd, env = _user_folder(tmp_path, base, key)
    env.pop("HINGE_API_KEY")  # the walk-through sets it itself
    # HINGE_URL is not set either: the CLI finds the server at HINGE_PORT's address
    done = run_walkthrough("The `hinge` command line", base, key, cwd, env)
    commands = [step.command.split()[1] for step in done if step.command.startswith("hinge")]
    for command in ("sample", "upload", "train", "jobs", "job", "models", "predict",
                    "export", "datasets"):
        assert command in commands
    assert (cwd / "sample.model").read_text().startswith("solver_type L2R_L1LOSS_SVC_DUAL")


def test_shown_outputs_are_read_as_the_docstring_says() -> None:
    """The reader itself: a wrong value, a missing key or a changed id must fail."""
    shown = shown_json('{"id":"3f2c…","rows":32561,"labels":[-1.0,1.0],"r":{…},'
                       '"acc":0.85,"v":[-3.94,…],…}')
    good = {"id": "a" * 32, "rows": 32561, "labels": [-1.0, 1.0], "r": {"x": 1},
            "acc": 0.8512, "v": [-3.9411, 2.0], "extra": True}
    check_value(good, shown)
    for bad in ({**good, "rows": 32560}, {**good, "labels": [-1.0, -1.0]},
                {**good, "acc": 0.86}, {**good, "id": "not-an-id"}, {**good, "v": [-3.95]},
                {k: v for k, v in good.items() if k != "r"}, {**good, "rows": "32561"}):
        with pytest.raises(AssertionError):
            check_value(bad, shown)
    pattern = line_pattern("# job 9b1e… succeeded: exit converged, primal 1143…",
                           capture="9b1e…")
    match = pattern.search("# job " + "c" * 32 + " succeeded: exit converged, primal 11435")
    assert match and match.group(1) == "c" * 32
    assert not pattern.search("# job " + "c" * 32 + " failed: exit converged, primal 11435")
    assert not line_pattern("-1 -3.94…").search("-1\t-1.30884")
