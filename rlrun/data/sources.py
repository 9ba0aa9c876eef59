"""Raw records (dicts) from a recipe's ``data.source``: the generator, local files, or the HF hub."""

from __future__ import annotations

import copy
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.packages import is_installed
from rlrun.schema.data import Data
from rlrun.tasks import GENERATOR_SETTINGS
from rlrun.tasks.arithmetic import DATA_SOURCE as ARITHMETIC
from rlrun.tasks.arithmetic import ArithmeticTask
from rlrun.tasks.guess_number import DATA_SOURCE as GUESS_NUMBER
from rlrun.tasks.guess_number import GuessNumberTask
from rlrun.user_code import is_live_name, live_object

FILE_SUFFIXES = (".jsonl", ".json", ".parquet")
GENERATORS = tuple(GENERATOR_SETTINGS.values())  # the built-in tasks, each with its own settings in `data`
DATA_EXTRA = "pip install 'rlrun[data]'"


class DataError(RecipeError, ValueError):
    """A dataset cannot be loaded or does not fit the recipe (missing keys, overlong prompts...):
    a recipe error located at the data file (and line) and the recipe key naming it, so every
    command reports it as one paragraph with exit code 2."""

    def __init__(self, where: str, reason: str, *, line: int | None = None, key: str = "data.source"):
        issue = ConfigIssue(
            reason,
            key=key,
            code="data",
            file=where,
            line=line,
            column=1 if line is not None else None,
            fix=f"correct the data, or point `{key}` at data that fits the recipe",
        )
        super().__init__([issue])
        self.where, self.reason, self.line = where, reason, line

    def for_key(self, key: str) -> DataError:
        """The same problem, blamed on another recipe key (`data.val_source`)."""
        return DataError(self.where, self.reason, line=self.line, key=key)


Source = str | list[str]  # one source, or several files read one after another


def source_files(source: Source) -> list[str]:
    """The sources a `data.source` names: itself, or each file of a list."""
    return list(source) if isinstance(source, list) else [source]


def shown(source: Source) -> str:
    """How messages name a source."""
    return ", ".join(source_files(source))


def load_records(source: Source, split: str, data: Data) -> list[dict[str, Any]] | None:
    """Records of ``split`` ("train" | "validation"); None when the source has no such split.

    ``rlrun:arithmetic`` uses the ``data.arithmetic`` settings, ``rlrun:guess_number`` the
    ``data.guess_number`` ones; a file is one split by itself;
    a list of files is every file's records, in the list's order (each keeps its own
    ``data_source`` column, which routes verl-style rewards);
    ``hf:<name>[:<config>]`` loads ``train``, and for validation ``validation`` or ``test``.
    """
    if isinstance(source, list):
        return [record for path in source for record in load_file(path)]
    if source == ARITHMETIC:
        arithmetic = data.arithmetic
        task = ArithmeticTask(
            digits=arithmetic.digits, operators=tuple(arithmetic.operators), seed=arithmetic.seed
        )
        return task.train(arithmetic.train_size) if split == "train" else task.validation(arithmetic.val_size)
    if source == GUESS_NUMBER:
        game = data.guess_number
        games = GuessNumberTask(low=game.low, high=game.high, max_guesses=game.max_guesses, seed=game.seed)
        return games.train(game.train_size) if split == "train" else games.validation(game.val_size)
    if source.startswith("hf:"):
        return _load_hub(source[3:], split)
    return load_file(source)


def is_split_source(source: Source) -> bool:
    """Whether the source holds its own validation split (a file, or a list of them, is one
    split by itself)."""
    return isinstance(source, str) and (source in GENERATORS or source.startswith("hf:"))


def reader_package(source: str) -> str | None:
    """The optional package that reads `source` (`pyarrow` for parquet files, `datasets` for
    the hub), or None when it needs none."""
    if source.startswith("hf:"):
        return "datasets"
    return "pyarrow" if source.endswith(".parquet") else None


def missing_reader(source: Source) -> str | None:
    """The package `source` (or one of its files) needs that is not installed here, or None."""
    for one in source_files(source):
        package = reader_package(one)
        if package is not None and not is_installed(package):
            return package
    return None


def load_file(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``.jsonl``, ``.json`` (a list of objects) or ``.parquet`` file, or of rows
    given from Python (a ``python-object:`` name: a copy, which the run may change)."""
    if is_live_name(str(path)):
        return copy.deepcopy(live_object(str(path)))
    path = Path(path)
    if path.suffix not in FILE_SUFFIXES:
        raise DataError(
            str(path), f"unsupported data file type {path.suffix!r}; use one of {', '.join(FILE_SUFFIXES)}"
        )
    if not path.is_file():
        raise DataError(str(path), "no such data file")
    if path.suffix == ".parquet":
        if missing_reader(str(path)):
            raise DataError(str(path), f"reading parquet needs the `pyarrow` package ({DATA_EXTRA})")
        table = _parquet(path, lambda pq: pq.read_table(path))
        return table.to_pylist()
    records = [record for _, record in _json_records(path)]
    if path.suffix == ".json" and not all(isinstance(r, dict) for r in records):
        raise DataError(str(path), "a .json dataset must be a list of objects")
    return records


def read_columns(path: str | Path) -> tuple[set[str], dict[str, Any] | None]:
    """Cheaply, what a data file holds: its top-level column names, and its first record when
    reading one is cheap (a .jsonl line; a .parquet file gives only its schema), or of rows given
    from Python. Raises DataError (ImportPathError: rows this process was not given)."""
    if is_live_name(str(path)):
        rows = live_object(str(path))
        return (set(rows[0]) if rows else set()), (rows[0] if rows else None)
    path = Path(path)
    if path.suffix == ".parquet":
        schema = _parquet(path, lambda pq: pq.read_schema(path))
        return set(schema.names), None
    first = next(_json_records(path), None)
    return (set(first[1]) if first else set()), (first[1] if first else None)


def _reader(source: str, module: str) -> Any:
    """`module` imported, or a DataError at `source`: an installed reader whose own dependencies do
    not match (a `datasets` newer than the `huggingface_hub` beside it) fails at import, and that
    is the environment's fault, not a traceback's."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        package = module.partition(".")[0]
        raise DataError(
            source,
            f"the `{package}` package is installed but cannot be imported ({type(err).__name__}: {err}); "
            f"reinstall it so that it matches the packages beside it ({DATA_EXTRA})",
        ) from None


def _parquet(path: Path, read: Any) -> Any:
    pyarrow = _reader(str(path), "pyarrow")
    pq = _reader(str(path), "pyarrow.parquet")
    try:
        return read(pq)
    except (pyarrow.ArrowException, OSError) as err:
        raise DataError(str(path), f"not a readable Parquet file ({err})") from None


def _json_records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, record) of a .jsonl file one line at a time, or of a .json file's list."""
    try:
        # utf-8-sig: a byte-order mark at the start (Windows editors, Excel exports) is not data
        with path.open(encoding="utf-8-sig") as lines:
            if path.suffix == ".json":
                records = json.load(lines)
                if not isinstance(records, list):
                    raise DataError(str(path), "a .json dataset must be a list of objects")
                yield from ((1, record) for record in records)
                return
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise DataError(str(path), f"invalid JSON ({err.msg})", line=number) from None
                if not isinstance(record, dict):
                    raise DataError(str(path), "each line must be a JSON object", line=number)
                yield number, record
    except json.JSONDecodeError as err:
        raise DataError(str(path), f"invalid JSON ({err.msg})", line=err.lineno) from None
    except UnicodeDecodeError as err:
        raise DataError(str(path), f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise DataError(str(path), f"cannot be read ({err.strerror or err})") from None


def _load_hub(spec: str, split: str) -> list[dict[str, Any]] | None:
    if missing_reader(f"hf:{spec}"):
        raise DataError(f"hf:{spec}", f"needs the `datasets` package ({DATA_EXTRA})")
    datasets = _reader(f"hf:{spec}", "datasets")

    name, _, config = spec.partition(":")
    try:
        available = datasets.get_dataset_split_names(name, config or None)
    except Exception as err:  # network, authentication, unknown name: all reported the same way
        raise DataError(f"hf:{spec}", f"cannot load the dataset ({type(err).__name__}: {err})") from err
    wanted = ["train"] if split == "train" else ["validation", "test"]
    chosen = next((s for s in wanted if s in available), None)
    if chosen is None:
        if split == "train":
            raise DataError(f"hf:{spec}", f"has no 'train' split (splits: {', '.join(available)})")
        return None
    return datasets.load_dataset(name, config or None, split=chosen).to_list()
