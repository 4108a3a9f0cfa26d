"""Running the `hinge` console script in tests, as a user would: a real process, with
HINGE_URL and HINGE_API_KEY in its environment, this checkout's code on its path."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import termios
import time
import tomllib
from pathlib import Path

import httpx

from app.client import HingeClient
from tests.support import REPO


def entry_point() -> str:
    """`module:function` of the `hinge` script, as pyproject.toml declares it."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    return str(scripts["hinge"])


def hinge_bin_dir(tmp: Path) -> Path:
    """A directory with an executable `hinge`: the installed console script when the
    environment has it, else one written from pyproject's entry point (an environment
    installed before the script was declared), so the test runs the declared entry point
    either way."""
    installed = Path(sys.executable).parent / "hinge"
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    target = bin_dir / "hinge"
    if installed.exists():
        shutil.copy(installed, target)
    else:
        module, function = entry_point().split(":")
        target.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\n"
                          f"sys.exit({function}())\n")
    target.chmod(0o755)
    return bin_dir


def cli_env(base_url: str, key: str, bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "HINGE_URL": base_url,
        "HINGE_API_KEY": key,
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),  # this checkout's app/, whatever the editable install says
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
    })
    return env


class Live:
    """A live service as the CLI tests use it: its address, an admin key, the environment
    of a shell that runs `hinge` against it (cli_env) and a working folder."""

    def __init__(self, http: httpx.Client, tmp: Path) -> None:
        self.http = http
        self.base = str(http.base_url).rstrip("/")
        self.key = http.headers["Authorization"].removeprefix("Bearer ")
        self.env = cli_env(self.base, self.key, hinge_bin_dir(tmp))
        self.tmp = tmp

    def client(self) -> HingeClient:
        return HingeClient(self.base, self.key)

    def hinge(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["hinge", *args], env=self.env, cwd=self.tmp, input=stdin,
                              capture_output=True, timeout=300)


# -- a terminal: the CLI as typed at a keyboard ------------------------------------------


def spawn_in_pty(args: list[str], env: dict[str, str], cwd: Path
                  ) -> tuple[subprocess.Popen, int]:
    """`args` in a new session whose controlling terminal is a pty: bytes written to the
    master are typed at the keyboard (0x03 is Ctrl-C: the terminal sends SIGINT)."""
    master, slave = pty.openpty()

    def as_a_terminal_starts_it() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        # A shell at a terminal starts a command with SIGINT at its default; pytest may
        # itself run with SIGINT ignored (started in the background by a script), and an
        # ignored SIGINT is inherited, so Ctrl-C would never reach the CLI.
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    process = subprocess.Popen(
        args, env=env | {"TERM": "xterm"}, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True, preexec_fn=as_a_terminal_starts_it)
    os.close(slave)
    return process, master


def read_until(master: int, needle: bytes, seen: bytearray, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{needle!r} not seen; the terminal shows:\n{seen.decode()}")
        ready, _, _ = select.select([master], [], [], left)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:  # the process closed the terminal
                raise TimeoutError(f"{needle!r} not seen:\n{seen.decode()}") from None


def drain(master: int, seen: bytearray) -> None:
    """Whatever the (exited) process wrote that is not read yet."""
    while select.select([master], [], [], 0.5)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            return
        if not chunk:
            return
        seen += chunk
