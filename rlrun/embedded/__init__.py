"""The tiny models shipped inside the package, named ``rlrun:<name>`` in recipes.

``resolve_model_path`` turns such a name into the packaged Hugging Face directory; any other
string (a local directory or a hub id) passes through unchanged. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

PREFIX = "rlrun:"
MODELS_DIR = Path(__file__).parent / "models"


class UnknownEmbeddedModelError(ValueError):
    """A recipe named an ``rlrun:`` model that is not shipped."""


def embedded_model_names() -> list[str]:
    """The shipped models, as recipes name them (``rlrun:tiny-base``, ...)."""
    return sorted(f"{PREFIX}{d.name}" for d in MODELS_DIR.iterdir() if (d / "config.json").is_file())


def resolve_model_path(name_or_path: str) -> str:
    """``rlrun:<name>`` -> the packaged model directory; anything else unchanged."""
    if not name_or_path.startswith(PREFIX):
        return name_or_path
    if name_or_path not in embedded_model_names():
        raise UnknownEmbeddedModelError(
            f"unknown embedded model {name_or_path!r}; valid: {', '.join(embedded_model_names())}"
        )
    return str(MODELS_DIR / name_or_path[len(PREFIX) :])
