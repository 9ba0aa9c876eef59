"""Raw records (dicts) from a recipe's ``data.source``: the generator, local files, or the HF hub."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlrun.tasks.arithmetic import ArithmeticTask

ARITHMETIC = "rlrun:arithmetic"
FILE_SUFFIXES = (".jsonl", ".json", ".parquet")


class DataError(ValueError):
    """A dataset cannot be loaded or does not fit the recipe (missing keys, overlong prompts...)."""


def load_records(
    source: str, split: str, arithmetic: Mapping[str, Any] | None = None
) -> list[dict[str, Any]] | None:
    """Records of ``split`` ("train" | "validation"); None when the source has no such split.

    ``rlrun:arithmetic`` uses the ``data.arithmetic`` settings; a file is one split by itself;
    ``hf:<name>[:<config>]`` loads ``train``, and for validation ``validation`` or ``test``.
    """
    if source == ARITHMETIC:
        settings = dict(arithmetic or {})
        sizes = {"train": settings.pop("train_size", 20000), "validation": settings.pop("val_size", 500)}
        settings["operators"] = tuple(settings.get("operators", ("+",)))
        task = ArithmeticTask(**settings)
        return task.train(sizes["train"]) if split == "train" else task.validation(sizes["validation"])
    if source.startswith("hf:"):
        return _load_hub(source[3:], split)
    return load_file(source)


def is_split_source(source: str) -> bool:
    """Whether the source holds its own validation split (a file is one split by itself)."""
    return source == ARITHMETIC or source.startswith("hf:")


def load_file(path: str | Path) -> list[dict[str, Any]]:
    """Records of a ``.jsonl``, ``.json`` (a list of objects) or ``.parquet`` file."""
    path = Path(path)
    if path.suffix not in FILE_SUFFIXES:
        raise DataError(
            f"{path}: unsupported data file type {path.suffix!r}; use one of {', '.join(FILE_SUFFIXES)}"
        )
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        records = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{number}: invalid JSON ({err.msg})") from err
        return records
    records = json.loads(text)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise DataError(f"{path}: a .json dataset must be a list of objects")
    return records


def _load_hub(spec: str, split: str) -> list[dict[str, Any]] | None:
    try:
        import datasets
    except ImportError:
        raise DataError(f"hf:{spec} needs the `datasets` package (pip install 'rlrun[data]')") from None
    name, _, config = spec.partition(":")
    try:
        available = datasets.get_dataset_split_names(name, config or None)
    except Exception as err:  # network, authentication, unknown name: all reported the same way
        raise DataError(f"hf:{spec}: cannot load the dataset ({type(err).__name__}: {err})") from err
    wanted = ["train"] if split == "train" else ["validation", "test"]
    chosen = next((s for s in wanted if s in available), None)
    if chosen is None:
        if split == "train":
            raise DataError(f"hf:{spec} has no 'train' split (splits: {', '.join(available)})")
        return None
    return datasets.load_dataset(name, config or None, split=chosen).to_list()
