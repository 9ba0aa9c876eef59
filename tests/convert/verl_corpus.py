"""Running `rlrun convert verl` on verl's own example scripts (fixtures/verl/, README there), as a
new user would: with verl-layout parquet files of the real row counts where the scripts look for
their data. Each script's outcome is one of: converted (a recipe that validates), refused (exit
2 with the reasons, the converter's or validation's), traceback (anything else)."""

from __future__ import annotations

import textwrap
import traceback
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rlrun.convert.conversion import ConvertError
from rlrun.convert.verl import VerlRun, convert, read_script
from rlrun.errors import RecipeError
from rlrun.facts.verl_keys import files
from rlrun.recipes import load_recipe

FIXTURES = Path(__file__).parent / "fixtures" / "verl"
SCRIPTS = sorted(FIXTURES.glob("*/*.sh"))

# The data each script names, by a word in its path: (data_source, rows of the train / test
# split as published, extra columns). DAPO-Math-17k's parquet repeats its 17,917 problems; the
# count here is the unique one (the step arithmetic is the same rule at any size).
DATASETS = {
    "gsm8k": ("openai/gsm8k", 7473, 1319, ()),
    "math": ("DigitalLearningGmbH/MATH-lighteval", 7500, 5000, ()),
    "dapo": ("math_dapo", 17917, 17917, ()),
    "aime": ("aime2024", 30, 30, ()),
    "geo3k": ("hiyouga/geometry3k", 2101, 601, ("images",)),
    "hh_rlhf": ("Dahoas/full-hh-rlhf", 112052, 12559, ()),
    "eurus": ("numina_olympiads", 1000, 100, ()),
}


def dataset_for(path: str) -> tuple[str, int, int, tuple[str, ...]]:
    lowered = path.lower()
    for word in ("aime", "dapo", "geo3k", "hh_rlhf", "eurus", "gsm8k", "math"):
        if word in lowered:
            return DATASETS[word]
    return DATASETS["gsm8k"]


def write_parquet(path: Path, data_source: str, rows: int, extra: tuple[str, ...]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {
        "data_source": [data_source] * rows,
        "prompt": [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(rows)],
        "ability": ["math"] * rows,
        "reward_model": [{"style": "rule", "ground_truth": str(2 * i)} for i in range(rows)],
        "extra_info": [{"split": path.stem, "index": i} for i in range(rows)],
    }
    for name in extra:
        columns[name] = [[{"bytes": b""}] for _ in range(rows)]
    pq.write_table(pa.table(columns), path)


def place_data(run: VerlRun, root: Path) -> None:
    """verl-layout parquet files wherever the run's data keys point (relative paths from `root`)."""
    for key, split in (("data.train_files", 1), ("data.val_files", 2)):
        value = run.settings.get(key)
        if value is None or getattr(value, "names", ()):
            continue
        try:
            paths = files(value)
        except ValueError:
            continue
        for path in paths:
            file = Path(path).expanduser()
            file = file if file.is_absolute() else root / file
            if file.suffix != ".parquet" or file.exists() or not str(file).startswith(str(root)):
                continue
            source, *counts, extra = dataset_for(str(file))
            write_parquet(file, source, counts[split - 1], extra)


@dataclass
class Outcome:
    script: str
    kind: str  # converted | refused | traceback
    detail: str  # the recipe's YAML, the refusal, or the traceback
    recipe: dict | None = None


def run_script(script: Path, root: Path) -> Outcome:
    """Convert one script in `root` (the working directory and $HOME, with the data placed)."""
    environ = {"HOME": str(root)}
    name = f"{script.parent.name}/{script.name}"
    try:
        text = script.read_text(encoding="utf-8")
        try:
            run = read_script(text, environ)
        except ConvertError as err:
            return Outcome(name, "refused", str(err))
        run.name = name
        place_data(run, root)
        try:
            conversion = convert(run)
        except ConvertError as err:
            return Outcome(name, "refused", str(err))
        out = root / "recipes" / (script.stem + ".yaml")
        out.parent.mkdir(exist_ok=True)
        out.write_text(conversion.to_yaml())
        try:
            recipe = load_recipe(out, environment=False).data
        except RecipeError as err:  # `rlrun convert` prints these errors, exits 2 and writes nothing
            return Outcome(name, "refused", f"{name}: the converted recipe does not validate\n{err}")
        return Outcome(name, "converted", conversion.report(), recipe)
    except Exception:  # noqa: BLE001  (what is being counted)
        return Outcome(name, "traceback", traceback.format_exc())


def tally(outcomes: list[Outcome]) -> str:
    kinds = ("converted", "refused", "traceback")
    lines = [", ".join(f"{sum(o.kind == k for o in outcomes)} {k}" for k in kinds)]
    for o in outcomes:
        first = (
            o.detail.splitlines()[1] if o.kind == "refused" and "\n" in o.detail else o.detail.splitlines()[0]
        )
        lines.append(f"{o.kind:9} {o.script}: {textwrap.shorten(first, 160)}")
    return "\n".join(lines)
