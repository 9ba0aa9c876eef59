"""A corpus of bad recipes, bad data and bad command lines: each must end in one located
paragraph and exit code 2, never a traceback, a hang or a silent exit 0 — in `validate` and in
`train --dry-run` alike. A few go through a real process (its true exit code and streams); the
rest run in-process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.recipes import load_recipe
from rlrun.recipes.keys import all_keys, section_at

PARQUET_GARBAGE = b"PAR1 this is not a parquet file"


def _alias_bomb() -> str:
    """`a9` expands to 9**10 values from 100 written ones ("billion laughs")."""
    lines = ["extends: base", "a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Case:
    """`files` are written to an empty working directory, then `rlrun *args` runs there; the
    error must name `where` (file, line, key) and say `says`."""

    id: str
    args: tuple[str, ...]
    where: str
    says: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    loads: bool = False  # gets as far as loading the tokenizer or the data (a few seconds)

    @property
    def param(self) -> object:
        return pytest.param(self, id=self.id, marks=[pytest.mark.slow] if self.loads else [])


VALIDATE_R = ("validate", "r.yaml")
CASES = [
    # --- YAML the loader refuses, located by line and column
    Case(
        "nul-byte",
        VALIDATE_R,
        "r.yaml, line 3, column 7",
        "a character YAML does not allow (U+0000, a NUL byte)",
        {"r.yaml": "extends: base\nrollout:\n  n: 4\x00\n"},
    ),
    Case(
        "complex-key",
        VALIDATE_R,
        "r.yaml, line 2, column 3",
        "a key must be a plain name, not a YAML sequence",
        {"r.yaml": "extends: base\n? [rollout, n]\n: 4\n"},
    ),
    Case(
        "nesting-3000-deep",
        VALIDATE_R,
        "r.yaml, line 2, column 103",
        "the YAML is refused: nested deeper than 100 levels",
        {"r.yaml": "extends: base\nx: " + "[" * 3000 + "]" * 3000 + "\n"},
    ),
    Case(
        "alias-bomb",
        VALIDATE_R,
        "r.yaml, line 6, column 10",
        "the YAML is refused: aliases expand to more than 10000 values",
        {"r.yaml": _alias_bomb()},
    ),
    Case(
        "recursive-alias",
        VALIDATE_R,
        "r.yaml, line 2, column 11",
        "the alias *a is inside its own anchor",
        {"r.yaml": "extends: base\na: &a [1, *a]\n"},
    ),
    Case(
        "python-tag",
        VALIDATE_R,
        "r.yaml, line 2, column 10",
        "the tag `!!python/object:os.system` is not allowed (safe YAML)",
        {"r.yaml": "extends: base\nrollout: !!python/object:os.system\n  n: 4\n"},
    ),
    Case(
        "impossible-date",
        VALIDATE_R,
        "r.yaml, line 2, column 14",
        "cannot read this !!timestamp value (month must be in 1..12)",
        {"r.yaml": "extends: base\ndescription: 2024-13-45\n"},
    ),
    Case(
        "latin-1",
        VALIDATE_R,
        "r.yaml, line 4, column 6",
        "the recipe is not UTF-8 text: byte 0xe9 cannot be decoded",
        {"r.yaml": "extends: base\nrollout:\n  n: 4\n# caf\xe9\n".encode("latin-1")},
    ),
    Case(
        "extends-a-folder",
        VALIDATE_R,
        "r.yaml, line 1, column 1, `extends`",
        "the recipe to extend, './parent.yaml', is a folder, not a recipe file",
        {"r.yaml": "extends: ./parent.yaml\n", "parent.yaml/x.yaml": "extends: base\n"},
    ),
    Case(
        "integer-key",
        VALIDATE_R,
        "r.yaml, line 3, column 3, `rollout.1`",
        'a key must be a name. Expected a string. Found the integer 1. Fix: quote it (`"1":`)',
        {"r.yaml": "extends: base\nrollout:\n  1: 4\n"},
    ),
    # --- user code that exits while being imported
    Case(
        "reward-module-exits",
        VALIDATE_R,
        "r.yaml, line 4, column 7, `reward.functions.0.fn`",
        "the module 'exits' raised SystemExit(0) while being imported",
        {
            "r.yaml": "extends: base\nreward:\n  functions:\n    - fn: exits:score\n",
            "exits.py": "import sys\nsys.exit(0)\n",
        },
    ),
    Case(
        "plugin-module-exits",
        VALIDATE_R,
        "r.yaml, line 3, column 13, `algorithm.plugins.0`",
        "the module 'exits_too' raised SystemExit(3) while being imported",
        {
            "r.yaml": "extends: base\nalgorithm:\n  plugins: [exits_too]\n",
            "exits_too.py": "raise SystemExit(3)\n",
        },
    ),
    # --- keys an override creates are the override's
    Case(
        "override-creates-section",
        ("validate", "grpo", "a.b="),
        "command-line override `a.b=`, `a`",
        "unknown key",
    ),
    Case(
        "override-misspells-section",
        ("validate", "grpo", "trainr.total_steps=10"),
        "command-line override `trainr.total_steps=10`, `trainr`",
        "unknown key; did you mean `trainer`?",
    ),
    # --- non-finite floats
    Case(
        "infinite-lr",
        ("validate", "grpo", "actor.optimizer.lr=.inf"),
        "`actor.optimizer.lr`",
        "not a finite number. Expected a finite number. Found .inf.",
    ),
    Case(
        "infinite-temperature",
        ("validate", "grpo", "rollout.temperature=.inf"),
        "`rollout.temperature`",
        "not a finite number",
    ),
    Case(
        "nan-entropy-coef",
        ("validate", "grpo", "actor.entropy_coef=.nan"),
        "`actor.entropy_coef`",
        "not a finite number. Expected a finite number. Found .nan.",
    ),
    Case(
        "nan-reward-weight",
        VALIDATE_R,
        "r.yaml, line 5, column 7, `reward.functions.0.weight`",
        "not a finite number",
        {"r.yaml": "extends: base\nreward:\n  functions:\n    - fn: rlrun:exact_match\n      weight: .nan\n"},
    ),
    # --- command-line options
    Case(
        "negative-num-processes",
        ("train", "grpo", "--num-processes", "-3"),
        "'--num-processes'",
        "greater than or equal to 1",
    ),
    Case("zero-num-machines", ("train", "grpo", "--num-machines", "0"), "'--num-machines'", "1"),
    Case(
        "port-out-of-range", ("resume", "x", "--main-process-port", "70000"), "'--main-process-port'", "65535"
    ),
    # --- data and models, caught by validation (no model loads)
    Case(
        "data-missing-columns",
        ("validate", "grpo", "data.source=d.jsonl"),
        "`data.source`",
        "the data file d.jsonl: the first record has no 'prompt' (keys: answer, question); set data.prompt_key",
        {"d.jsonl": '{"question": "1+1=", "answer": "2"}\n'},
    ),
    Case(
        "data-malformed-parquet",
        ("train", "grpo", "--dry-run", "data.source=d.parquet"),
        "`data.source`",
        "the data file d.parquet: not a readable Parquet file",
        {"d.parquet": PARQUET_GARBAGE},
    ),
    Case(
        "model-path-missing",
        ("train", "grpo", "--dry-run", "model.path=./no_such_model"),
        "`model.path`",
        "the model folder does not exist",
    ),
    Case(
        "model-config-corrupted",
        ("train", "grpo", "--dry-run", "reference.path=./m"),
        "`reference.path`",
        "its config.json cannot be read as JSON",
        {"m/config.json": "{not json"},
    ),
    # --- data and models only loading can judge: train --dry-run reports them the same way
    Case(
        "data-bad-line",
        ("train", "grpo", "--dry-run", "data.source=d.jsonl"),
        "d.jsonl, line 2, column 1, `data.source`",
        "invalid JSON",
        {"d.jsonl": '{"prompt": "1+1=", "answer": "2"}\nnot json\n'},
        loads=True,
    ),
    Case(
        "data-bad-line-train",
        ("train", "grpo", "--name", "x", "data.source=d.jsonl"),
        "d.jsonl, line 2, column 1, `data.source`",
        "invalid JSON",
        {"d.jsonl": '{"prompt": "1+1=", "answer": "2"}\nnot json\n'},
        loads=True,
    ),
    Case(
        "model-folder-without-model",
        ("train", "grpo", "--dry-run", "model.path=./m"),
        "m:",
        "the model cannot be loaded",
        {"m/config.json": "{}"},
        loads=True,
    ),
]

# --- the newer commands: sweep, eval, compare, export (issue 25). Every path a sweep, --name or
# --run-dir makes stays in its folder with a name the file system accepts, checked before anything
# loads; every file and string is read as recipes are.
SWEEP = ("sweep", "s.yaml", "--dry-run")
LONG = "a" * 300
CASES += [
    Case(
        "sweep-name-parent-folder",
        SWEEP,
        "s.yaml, line 1, column 1, `name`",
        "the sweep's name `..` cannot be a folder: `..` is the folder itself or its parent",
        {"s.yaml": "name: ..\nrecipe: grpo\n"},
    ),
    Case(
        "sweep-name-too-long",
        SWEEP,
        "s.yaml, line 1, column 1, `name`",
        "it is 300 bytes long; a file system allows at most 255 per folder name",
        {"s.yaml": f"name: {LONG}\nrecipe: grpo\n"},
    ),
    Case(
        "sweep-seed-too-long-for-a-folder",
        SWEEP,
        "`trainer.output_dir`",
        "the run's directory cannot be made: its part `seed-999",
        {"s.yaml": f"recipe: grpo\nseeds: [{'9' * 300}]\n"},
    ),
    Case(
        "sweep-output-dir-under-a-file",
        SWEEP,
        "s.yaml, line 3, column 3, `trainer.output_dir`",
        "runs cannot be written there: afile is a file, not a folder",
        {"s.yaml": "recipe: grpo\noverrides:\n  trainer.output_dir: afile/runs\n", "afile": "x\n"},
    ),
    Case(
        "sweep-latin-1",
        SWEEP,
        "s.yaml, line 2, column 6",
        "the sweep file is not UTF-8 text: byte 0xe9 cannot be decoded",
        {"s.yaml": "recipe: grpo\n# caf\xe9\n".encode("latin-1")},
    ),
    Case(
        "sweep-utf-16",
        SWEEP,
        "s.yaml:",
        "the sweep file is UTF-16 text, not UTF-8",
        {"s.yaml": "recipe: grpo\n".encode("utf-16")},
    ),
    Case(
        "sweep-a-list",
        SWEEP,
        "s.yaml, line 1, column 1",
        "a sweep file is a mapping of its keys (`recipe:`, `grid:`, `list:`, `seeds:`, ...). Found a YAML sequence",
        {"s.yaml": "- recipe: grpo\n"},
    ),
    Case(
        "recipe-utf-16",
        VALIDATE_R,
        "r.yaml:",
        "the recipe is UTF-16 text, not UTF-8",
        {"r.yaml": "extends: base\n".encode("utf-16")},
    ),
    Case(
        "run-dir-a-file-dry-run",
        ("train", "grpo", "--run-dir", "afile", "--dry-run"),
        "command-line override `--run-dir afile`, `--run-dir`",
        "the run directory cannot be made: it is a file, not a folder",
        {"afile": "x\n"},
    ),
    Case(
        "run-dir-a-file",
        ("train", "grpo", "--run-dir", "afile"),
        "`--run-dir`",
        "the run directory cannot be made: it is a file, not a folder",
        {"afile": "x\n"},
    ),
    Case(
        "run-name-parent-folder",
        ("train", "grpo", "--name", "..", "--dry-run"),
        "command-line override `--name ..`, `--name`",
        "a run name is a single folder name inside trainer.output_dir, and `..` is the folder itself or its parent",
    ),
    Case(
        "run-name-control-character",
        ("train", "grpo", "--name", "a\x01b", "--dry-run"),
        "`--name`",
        "it holds the control character U+0001",
    ),
    Case(
        "run-name-too-long",
        ("train", "grpo", "--name", LONG, "--dry-run"),
        "`--name`",
        "it is 300 bytes long",
    ),
    Case(
        "output-dir-not-writable",
        ("validate", "grpo", "trainer.output_dir=/proc/1/runs"),
        "command-line override `trainer.output_dir=/proc/1/runs`, `trainer.output_dir`",
        "runs cannot be written there: this user may not write in /proc/1",
    ),
    Case(
        "eval-reward-unclosed-mapping",
        ("eval", "rlrun:tiny-base", "--reward", "{model: x"),
        "`--reward {model: x`",
        "YAML syntax error: while parsing a flow mapping expected ',' or '}', but got '<stream end>' (column 10)",
    ),
    Case(
        "eval-out-under-a-file",
        ("eval", "rlrun:tiny-base", "--out", "afile/r.json"),
        "--out afile/r.json",
        "its folder afile cannot be used: it is a file, not a folder",
        {"afile": "x\n"},
    ),
    Case(
        "compare-plot-in-a-missing-folder",
        ("compare", "--plot", "missing_dir/x.png", "r"),
        "--plot missing_dir/x.png",
        "the folder missing_dir does not exist",
    ),
    Case(
        "compare-plot-not-an-image",
        ("compare", "--plot", "curves.txt", "r"),
        "--plot curves.txt",
        "`.txt` is not an image format matplotlib writes",
    ),
    Case(
        "export-into-its-checkpoint",
        ("export", "ck/checkpoints/step_000005", "ck/checkpoints/step_000005/merged"),
        "ck/checkpoints/step_000005/merged is inside ck/checkpoints",
        "which rlrun prunes",
        {"ck/checkpoints/step_000005/config.json": "{}"},
    ),
    Case(
        "convert-printed-recipe-errors",
        ("convert", "verl", "actor_rollout_ref.actor.optim.lr=-1", "trainer.total_training_steps=5"),
        "the recipe above, line",
        "`actor.optimizer.lr`: value out of range",
    ),
    Case(
        "reward-model-folder-missing",
        ("validate", "grpo", "reward.functions=[{model: ./no_such_folder}]"),
        "`reward.functions.0.model`",
        "the model folder does not exist",
    ),
    Case(
        "homoglyph-in-a-key",
        ("validate", "grpo", "\u0430ctor.clip_ratio=0.2"),
        "`\u0430ctor`",
        "the key contains a non-ASCII character, `\u0430` (U+0430 CYRILLIC SMALL LETTER A) at position 1",
    ),
    Case(
        "sixty-errors-show-their-kind-once",
        VALIDATE_R,
        "r.yaml, line 2, column 1, `key_0`",
        "(59 more like it: r.yaml, line 3, column 1, `key_1`;",
        {"r.yaml": "extends: base\n" + "".join(f"key_{i}: {i}\n" for i in range(60))},
    ),
]

# Through a real process: the alias bomb (with a timeout: it used to hang) and user code calling
# sys.exit(0) (it used to end `validate` with exit code 0).
IN_A_PROCESS = {"alias-bomb", "reward-module-exits"}


def _write(folder: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def _check(case: Case, exit_code: int, output: str) -> None:
    text = " ".join(output.replace("│", " ").split())  # undo the panel's borders and wrapping
    assert exit_code == 2, text
    assert "Traceback" not in text
    assert case.where in text, text
    assert case.says in text, text


@pytest.mark.parametrize("case", [c.param for c in CASES if c.id not in IN_A_PROCESS])
def test_bad_input_is_one_located_paragraph_and_exit_2(case, tmp_path, monkeypatch):
    _write(tmp_path, case.files)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `rlrun` does for the working directory
    result = CliRunner().invoke(app, list(case.args), env={"COLUMNS": "200"})
    assert isinstance(result.exception, SystemExit), result.exception  # not a crash
    _check(case, result.exit_code, result.output)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c.param for c in CASES if c.id in IN_A_PROCESS])
def test_bad_input_through_the_installed_command(case, tmp_path):
    """`rlrun` as installed for this interpreter, as a user runs it."""
    command = shutil.which("rlrun", path=str(Path(sys.executable).parent)) or shutil.which("rlrun")
    assert command is not None, "the rlrun command is not installed"
    _write(tmp_path, case.files)
    result = subprocess.run(
        [command, *case.args], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    _check(case, result.returncode, result.stdout + result.stderr)


def _recipe_lines_traced(tmp_path: Path, keys: int) -> int:
    """Lines of rlrun.recipes executed to load a recipe of `keys` unknown top-level keys."""
    path = tmp_path / f"big{keys}.yaml"
    path.write_text("extends: base\n" + "".join(f"key_{i}: {i}\n" for i in range(keys)))
    package = str(Path(load_recipe.__code__.co_filename).parent)
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if not frame.f_code.co_filename.startswith(package):
            return None
        count += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        load_recipe(path)
    except Exception:  # noqa: BLE001, S110 (5000 unknown keys: the error is expected, the work is measured)
        pass
    finally:
        sys.settrace(None)
    return count


def test_loading_is_linear_in_the_number_of_keys(tmp_path):
    """A 5 MB recipe (20k keys) took 54 s: merging scanned every key's provenance for each key.
    Counted in executed lines, not seconds, so machine load cannot make it flaky: 4x the keys
    must cost about 4x the work (quadratic work would be 16x)."""
    load_recipe("base")  # imports and caches outside the count
    small, large = _recipe_lines_traced(tmp_path, 250), _recipe_lines_traced(tmp_path, 1000)
    assert large / small < 5, (small, large)


def _holds_floats(annotation: object) -> bool:
    return annotation is float or any(_holds_floats(arg) for arg in typing.get_args(annotation))


def test_every_number_key_must_be_finite():
    """One schema setting covers every float key, a key added later included."""
    checked = []
    for path in all_keys():
        section = section_at(path[:-1])
        name = str(path[-1])
        annotation = section.model_fields[name].annotation if section else None
        if not _holds_floats(annotation):
            continue
        bad = [0.5, float("nan")] if "list[" in str(annotation) else float("-inf")
        with pytest.raises(ValidationError) as info:
            section.model_validate({name: bad})
        assert "finite_number" in [e["type"] for e in info.value.errors() if e["loc"][0] == name], path
        checked.append(".".join(map(str, path)))
    assert {"actor.optimizer.lr", "actor.optimizer.betas", "reward.functions.weight"} <= set(checked)
