"""`rlrun:python`: a model's code run in a separate, confined process.

The process starts from a clean environment (no variable of this one, so no secret in it), in a
throw-away folder, and confines itself before it runs a line of the code
(`rlrun.agents.sandbox_child`): no network (its own network namespace, or Landlock's TCP rules),
no file outside its folder (a private root holding only read-only system and Python folders, or
Landlock's file rules), a pid namespace so that everything it starts ends with it, an
unprivileged user, and limits on CPU time, memory, disk, processes and open files. From here it
gets a wall-clock limit and a cap on what it may print; past either it is killed.

Where the machine allows neither a network namespace (root, or unprivileged user namespaces) nor
Landlock 4, or neither a mount namespace nor Landlock, the code is not run: the call's result is
the error saying so, and `rlrun validate` refuses a recipe naming `rlrun:python` on such a machine
(`sandbox_problem`).
"""

from __future__ import annotations

import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.schema.agent import PythonSandbox

CHILD = Path(__file__).with_name("sandbox_child.py")
REFUSED = 71  # the child's exit status when a required protection is missing (sandbox_child.REFUSED)
REQUIRED = ("filesystem", "network", "processes")  # protections without which no code runs
BYTES_PER_CHAR = 4  # UTF-8's widest character: what may be read for `output_chars` characters
_READ_BYTES = 65536


@dataclass(frozen=True)
class SandboxResult:
    """What the process printed (the first `output_chars` characters of each stream), how it
    ended (`exit_code`: negative for a signal), and whether it was stopped from here
    (`stopped`: "wall_clock" | "output" | None)."""

    stdout: str
    stderr: str
    exit_code: int
    stopped: str | None = None


class SandboxError(RuntimeError):
    """The code did not run to a result; the message says why, for the model to read."""


def run_python(
    code: str, limits: PythonSandbox, *, wall_s: float, output_chars: int, probe: bool = False
) -> SandboxResult:
    """Run `code` in a confined process under `limits` (the recipe's `agent.python`), stopped
    after `wall_s` seconds or `output_chars` characters of output (module docstring). `probe`:
    confine, print the report of what held and run nothing (`sandbox_report`)."""
    root_dir = tempfile.mkdtemp(prefix="rlrun-python-")
    request = {
        **limits.model_dump(),
        "code": code,
        "root_dir": root_dir,
        "require": [] if probe else list(REQUIRED),
        "probe": probe,
    }
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-X", "utf8", str(CHILD)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=root_dir,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},  # nothing of this process's environment
            start_new_session=True,  # its own process group, killed whole
        )
        return _collect(process, json.dumps(request).encode(), wall_s=wall_s, output_chars=output_chars)
    finally:
        shutil.rmtree(root_dir, ignore_errors=True)


def _collect(
    process: subprocess.Popen[bytes], request: bytes, *, wall_s: float, output_chars: int
) -> SandboxResult:
    """Feed the request, read both streams until they close, the wall clock runs out or more
    than the output cap arrives; then make sure the process group is gone."""
    cap = output_chars * BYTES_PER_CHAR
    output = {"stdout": bytearray(), "stderr": bytearray()}
    stopped = None
    deadline = time.monotonic() + wall_s
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(request)
        process.stdin.close()
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, "stdout")
            selector.register(process.stderr, selectors.EVENT_READ, "stderr")
            while selector.get_map() and stopped is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    stopped = "wall_clock"
                    break
                for key, _ in selector.select(timeout=left):
                    chunk = os.read(key.fd, _READ_BYTES)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    output[key.data] += chunk
                    if len(output[key.data]) > cap:
                        stopped = "output"
    except BrokenPipeError:  # the process ended before reading its request: its stderr says why
        pass
    finally:
        _kill_group(process)
    texts = {name: bytes(data[:cap]).decode("utf-8", errors="replace") for name, data in output.items()}
    cut = {name: text[:output_chars] for name, text in texts.items()}
    return SandboxResult(cut["stdout"], cut["stderr"], process.returncode, stopped)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()


@functools.lru_cache(maxsize=1)
def sandbox_report() -> dict[str, Any]:
    """What confinement this machine gives `rlrun:python` (probed once per process): which
    namespaces it could enter and how the file system, network and processes are confined."""
    result = run_python("", PythonSandbox(), wall_s=30.0, output_chars=2000, probe=True)
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError:
        return {"error": (result.stderr or result.stdout or f"exit status {result.exit_code}").strip()}


def sandbox_problem() -> str | None:
    """Why `rlrun:python` cannot run code on this machine, or None when it can."""
    report = sandbox_report()
    if "error" in report:
        return f"the sandbox could not start: {report['error']}"
    missing = [need for need in REQUIRED if not report.get(need)]
    if not missing:
        return None
    return (
        f"this machine cannot confine it: no {' and no '.join(missing)} isolation (files and network need "
        "root or unprivileged user namespaces, or else Landlock: ABI 1 for files, 4 for the network; a bound "
        "on processes needs a user other than root to run the code as)"
    )


def make_python_tool(limits: PythonSandbox, *, wall_s: float, output_chars: int) -> Callable[..., str]:
    """The `python` tool, running under `limits`, `wall_s` and `output_chars` (as `run_python`)."""

    def python(code: str) -> str:
        """Run Python code (standard library only) in a sandbox and return what it prints.

        Args:
            code: The program; print the values you want back.
        """
        result = run_python(code, limits, wall_s=wall_s, output_chars=output_chars)
        return python_output(result, limits, wall_s=wall_s)

    return python


def python_output(result: SandboxResult, limits: PythonSandbox, *, wall_s: float) -> str:
    """What the model reads of a run: its output, or a SandboxError saying how it failed."""
    if result.stopped == "wall_clock":
        raise SandboxError(f"the code ran past its {wall_s:g} s and was stopped")
    if result.stopped == "output":
        return result.stdout
    if result.exit_code == REFUSED:
        raise SandboxError(result.stderr.strip() or "the sandbox refused to run the code")
    if result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
        raise SandboxError(f"the code used up its {limits.cpu_time_s} s of CPU time")
    if result.exit_code != 0:
        last = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.exit_code}"]
        raise SandboxError(last[0])
    return result.stdout
