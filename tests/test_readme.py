"""The README's first command, exactly as written, in a fresh folder (as after a clone):
`rlrun train recipes/dapo.yaml` with no --name and no --run-dir. (The second, `python -m pytest`,
is what CI runs.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIRST_COMMAND = "rlrun train recipes/dapo.yaml"


def test_the_readme_starts_with_this_command():
    assert f"pip install -e . && {FIRST_COMMAND}" in (REPO / "README.md").read_text().split("\n## ")[0]


@pytest.mark.slow
def test_the_readme_train_command_runs_from_a_clean_folder(tmp_path):
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    args = FIRST_COMMAND.split()[1:]
    result = subprocess.run(
        [sys.executable, "-m", "rlrun", *args],  # what the `rlrun` console script runs
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("dapo-")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["final_step"] == 300
    assert (run_dir / "recipe.yaml").read_text() == (REPO / "recipes" / "dapo.yaml").read_text()
