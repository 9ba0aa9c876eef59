from collections.abc import Callable
from pathlib import Path

import pytest

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.recipes import load_recipe


@pytest.fixture
def write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """write("name.yaml", text) -> path; the working directory is tmp_path (paths in messages
    are then just the file name)."""
    monkeypatch.chdir(tmp_path)

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write


def _errors(path: Path | str, overrides: tuple[str, ...] = (), strict: bool = False) -> list[ConfigIssue]:
    with pytest.raises(RecipeError) as info:
        load_recipe(path, overrides, strict=strict)
    return info.value.issues


def _only_error(path: Path | str, overrides: tuple[str, ...] = ()) -> ConfigIssue:
    issues = _errors(path, overrides)
    assert len(issues) == 1, [i.format() for i in issues]
    return issues[0]


@pytest.fixture
def errors() -> Callable[..., list[ConfigIssue]]:
    """errors(path, overrides=(), strict=False): every issue loading raises."""
    return _errors


@pytest.fixture
def only_error() -> Callable[..., ConfigIssue]:
    """only_error(path, overrides=()): the one issue loading raises."""
    return _only_error
