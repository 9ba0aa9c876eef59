"""rlrun:python's sandbox, attacked for real on this machine: secrets, files, network, fork bombs,
loops, memory, output and disk. The fork bomb is bounded by RLIMIT_NPROC (the code runs as an
unprivileged user) inside a pid namespace, so it cannot hurt the shared machine."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from rlrun.agents.sandbox import (
    CHILD,
    REFUSED,
    SandboxError,
    SandboxResult,
    make_python_tool,
    python_output,
    run_python,
    sandbox_problem,
    sandbox_report,
)
from rlrun.schema.agent import PythonSandbox

LIMITS = PythonSandbox(cpu_time_s=2, memory_mb=256, max_processes=8, disk_mb=4)
WALL_S, OUTPUT_CHARS = 10.0, 2000


def run(code: str, limits: PythonSandbox = LIMITS, wall_s: float = WALL_S) -> SandboxResult:
    return run_python(code, limits, wall_s=wall_s, output_chars=OUTPUT_CHARS)


pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()}")


def test_code_runs_and_its_output_comes_back():
    result = run("print(sum(range(10)))")
    assert (result.stdout, result.stderr, result.exit_code, result.stopped) == ("45\n", "", 0, None)
    tool = make_python_tool(LIMITS, wall_s=WALL_S, output_chars=OUTPUT_CHARS)
    assert tool(code="print(2 ** 10)") == "1024\n"


def test_this_machine_confines_everything(monkeypatch):
    report = sandbox_report()
    assert report["filesystem"] and report["network"] and report["processes"]
    assert sandbox_problem() is None


def test_no_secret_of_the_parent_reaches_the_code(monkeypatch):
    monkeypatch.setenv("RLRUN_TEST_SECRET", "hunter2")
    code = (
        "import os\n"
        "print(sorted(os.environ))\n"
        "for path in (f'/proc/{os.getppid()}/environ', '/proc/1/environ', '/proc/self/environ'):\n"
        "    try:\n"
        "        print(open(path, 'rb').read())\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    result = run(code)
    assert "hunter2" not in result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == "['HOME', 'LANG', 'PATH', 'TMPDIR']"


def test_files_outside_its_folder_are_neither_written_nor_read(tmp_path):
    outside = tmp_path / f"escape-{uuid.uuid4().hex}"
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    os.chmod(tmp_path, 0o755)
    code = (
        "import os\n"
        f"for path in ({str(outside)!r}, '/tmp/escape-{uuid.uuid4().hex}', '/usr/escape'):\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        print('WROTE', path)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
        "try:\n"
        f"    print(open({str(secret)!r}).read())\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        "open('mine.txt', 'w').write('ok')\n"
        "print(open('mine.txt').read(), os.getcwd())\n"
    )
    result = run(code)
    assert "WROTE" not in result.stdout and "hunter2" not in result.stdout
    assert not outside.exists()
    assert result.stdout.splitlines()[-1].startswith("ok ")


def test_no_network_not_even_to_a_listener_on_this_machine():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.5)
        port = listener.getsockname()[1]
        code = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('CONNECTED')"
        )
        result = run(code)
        with pytest.raises(TimeoutError):
            listener.accept()
    assert "CONNECTED" not in result.stdout and result.exit_code == 1
    assert result.stderr.split(":")[0] in ("PermissionError", "OSError", "ConnectionRefusedError")


def _processes_of(uid: int) -> int:
    return sum(1 for p in Path("/proc").iterdir() if p.name.isdigit() and _owner(p) == uid)


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def test_a_fork_bomb_is_bounded_and_leaves_nothing_behind():
    code = (
        "import os, time\n"
        "n = 0\n"
        "while True:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "    except OSError as exc:\n"
        "        print(n, exc.errno)\n"
        "        break\n"
    )
    uid = 65534 if os.getuid() == 0 else os.getuid()
    before = _processes_of(uid)
    result = run(code)
    forked, errno = map(int, result.stdout.split())
    assert forked < LIMITS.max_processes and errno == 11  # EAGAIN: RLIMIT_NPROC
    assert _processes_of(uid) <= before  # the sleeping children died with the pid namespace


def test_an_endless_loop_is_stopped_by_the_wall_clock():
    result = run("while True:\n    pass", PythonSandbox(cpu_time_s=60), wall_s=1.0)
    assert result.stopped == "wall_clock"
    with pytest.raises(SandboxError, match="ran past its 1 s"):
        python_output(result, LIMITS, wall_s=1.0)


@pytest.mark.slow
def test_cpu_time_is_limited():
    limits = PythonSandbox(cpu_time_s=1)
    result = run("while True:\n    pass", limits, wall_s=60.0)
    assert result.stopped is None and result.exit_code in (137, 152)  # SIGKILL / SIGXCPU, as 128 + n
    with pytest.raises(SandboxError, match="used up its 1 s of CPU time"):
        python_output(result, limits, wall_s=60.0)


def test_memory_is_limited():
    result = run("x = bytearray(1 << 30)")
    assert result.exit_code == 1 and result.stderr.strip() == "MemoryError"


def test_output_is_capped_and_the_process_stopped():
    result = run("while True:\n    print('x' * 1000)")
    assert result.stopped == "output" and len(result.stdout) == OUTPUT_CHARS


def test_disk_is_limited():
    code = "open('big', 'wb').write(b'x' * (8 << 20))"  # 8 MiB into a 4 MiB folder
    result = run(code)
    assert result.exit_code == 1 and result.stderr.split(":")[0] == "OSError"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (SandboxResult("7\n", "", 0), "7\n"),
        (SandboxResult("x" * 10, "", -9, "output"), "x" * 10),
        (
            SandboxResult("", "Traceback...\nZeroDivisionError: division by zero\n", 1),
            SandboxError("ZeroDivisionError"),
        ),
        (
            SandboxResult("", "not confined here: no network isolation", REFUSED),
            SandboxError("not confined here"),
        ),
        (SandboxResult("", "", 3), SandboxError("exit status 3")),
    ],
)
def test_what_the_model_reads_of_a_run(result, expected):
    if isinstance(expected, SandboxError):
        with pytest.raises(SandboxError, match=str(expected)):
            python_output(result, LIMITS, wall_s=WALL_S)
    else:
        assert python_output(result, LIMITS, wall_s=WALL_S) == expected


UNPRIVILEGED = "/usr/bin/python3"


@pytest.fixture
def readable_dir():
    """A folder another user can read (pytest's tmp_path is under a root-only folder)."""
    folder = Path(tempfile.mkdtemp(prefix="rlrun-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.skipif(
    os.getuid() != 0 or shutil.which("setpriv") is None or not os.access(UNPRIVILEGED, os.X_OK),
    reason="needs root to become another user (setpriv) and a system Python that user can read",
)
def test_an_unprivileged_user_gets_the_same_confinement_from_user_namespaces(readable_dir):
    """As nobody the sandbox enters a user namespace instead of dropping root: the same checks hold
    (the confined process itself, started as rlrun starts it but by an unprivileged user)."""
    child = readable_dir / CHILD.name
    child.write_text(CHILD.read_text())
    child.chmod(0o644)

    def as_nobody(code: str, probe: bool = False) -> subprocess.CompletedProcess:
        root_dir = Path(tempfile.mkdtemp(dir=readable_dir))
        root_dir.chmod(0o777)
        request = {
            **LIMITS.model_dump(),
            "code": code,
            "root_dir": str(root_dir),
            "require": [],
            "probe": probe,
        }
        command = [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            UNPRIVILEGED,
            "-I",
            "-S",
            str(child),
        ]
        return subprocess.run(
            command,
            input=json.dumps(request),
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=root_dir,
        )

    report = json.loads(as_nobody("", probe=True).stdout)
    assert report["user"] == "unchanged" and "user" in report["namespaces"]
    assert report["filesystem"] and report["network"] and report["processes"]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        connect = as_nobody(f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)")
    assert connect.stderr.startswith(("PermissionError", "OSError")), connect.stderr
    assert as_nobody("open('/tmp/escape', 'w')").stderr.startswith(("FileNotFoundError", "PermissionError"))
    fork = "import os, time\nn = 0\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
    fork += "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    n += 1\nprint(n)"
    assert int(as_nobody(fork).stdout) < LIMITS.max_processes


def test_landlock_alone_confines_files_and_tcp_where_no_namespace_can_be_made(tmp_path):
    """The fallback without namespaces: Landlock's rules, applied in a process of their own."""
    work, outside = tmp_path / "work", tmp_path / "outside.txt"
    work.mkdir()
    code = (
        "import ctypes, socket, sys\n"
        f"sys.path.insert(0, {str(CHILD.parent)!r})\n"
        "import sandbox_child as c\n"
        "report = {}\n"
        f"c._landlock(ctypes.CDLL(None, use_errno=True), {str(work)!r}, private_root=False, report=report)\n"
        "print(report['filesystem'], '|', report['network'])\n"
        f"open({str(work / 'in.txt')!r}, 'w').write('ok')\n"
        "for attempt in (\n"
        f"    lambda: open({str(outside)!r}, 'w'),\n"
        f"    lambda: open({str(tmp_path / 'read.txt')!r}).read(),\n"
        "    lambda: socket.create_connection(('127.0.0.1', 9), timeout=1),\n"
        "):\n"
        "    try:\n"
        "        attempt()\n"
        "        print('ALLOWED')\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__)\n"
    )
    (tmp_path / "read.txt").write_text("secret")
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("landlock (ABI") and lines[0].endswith("| landlock TCP"), done.stderr
    assert lines[1:] == ["PermissionError", "PermissionError", "PermissionError"]
    assert (work / "in.txt").read_text() == "ok" and not outside.exists()
