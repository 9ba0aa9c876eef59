"""rlrun/convert/trl_defaults.py is the TRL it names: scripts/trl_defaults.py rebuilds it from the
installed TRL's config classes and finds it equal, wherever TRL is importable (`.ci/run` gives it
a venv with trl==1.16.0)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlrun.convert.trl_defaults import TRANSFORMERS_VERSION, TRL_VERSION

REPO = Path(__file__).resolve().parents[2]


def test_the_mirror_equals_the_installed_trl():
    trl = pytest.importorskip(
        "trl", reason="TRL is not installed here (pip install trl==1.16.0 checks the mirror)"
    )
    import transformers

    assert (trl.__version__, transformers.__version__) == (TRL_VERSION, TRANSFORMERS_VERSION), (
        "the mirror describes other versions than the installed ones: scripts/trl_defaults.py --write"
    )
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "trl_defaults.py")],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
