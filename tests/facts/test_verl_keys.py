"""The verl defaults rlrun mirrors (rlrun/facts/verl_keys.py) are the ones of the verl it names:
scripts/verl_defaults.py checks them against verl 0.9.1's generated trainer config
(fixtures/README.md), and names a default that moved."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from rlrun.facts.verl_keys import VERL_VERSION

REPO = Path(__file__).resolve().parents[2]
TREE = Path(__file__).parent / "fixtures" / "verl-0.9.1"
CONFIG = Path("verl") / "trainer" / "config" / "_generated_ppo_trainer.yaml"


def check(tree: Path) -> subprocess.CompletedProcess:
    script = REPO / "scripts" / "verl_defaults.py"
    return subprocess.run(
        [sys.executable, str(script), str(tree)], check=False, capture_output=True, text=True, cwd=REPO
    )


def test_the_mirror_agrees_with_verl_0_9_1():
    assert (TREE / "verl" / "version" / "version").read_text().strip() == VERL_VERSION == "0.9.1"
    result = check(TREE)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_default_that_moved_is_named(tmp_path):
    tree = tmp_path / "verl-next"
    shutil.copytree(TREE, tree)
    config = tree / CONFIG
    # a mirrored default (ppo_mini_batch_size) and one rlrun maps unchanged (clip_ratio_c, 3.0 in both)
    text = config.read_text().replace("  ppo_mini_batch_size: 256\n", "  ppo_mini_batch_size: 128\n", 1)
    config.write_text(text.replace("clip_ratio_c: 3.0", "clip_ratio_c: 5.0", 1))
    (tree / "verl" / "version" / "version").write_text("0.10.0\n")
    result = check(tree)
    assert result.returncode == 1
    assert "the tree is verl 0.10.0; rlrun/facts/verl_keys.py describes verl 0.9.1" in result.stdout
    assert (
        "VERL_DEFAULTS['actor_rollout_ref.actor.ppo_mini_batch_size'] = 256, but the tree has"
        in result.stdout
    )
    assert "actor_rollout_ref.actor.clip_ratio_c defaults to 5.0 in the tree" in result.stdout
    assert check(tmp_path / "elsewhere").returncode == 2
