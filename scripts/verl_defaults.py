"""Check the verl defaults in rlrun/facts/verl_keys.py against a verl source tree.

    python scripts/verl_defaults.py VERL_TREE     # exit 1, listing every difference

VERL_TREE is a verl checkout, or an unpacked wheel or sdist: the check reads its
`verl/version/version` and `verl/trainer/config/_generated_ppo_trainer.yaml` (the ppo_trainer
config with every default filled in; `${...}` references resolved as `rlrun convert verl` reads a
verl YAML). It holds when

- the tree is the verl `VERL_VERSION` names;
- each `VERL_DEFAULTS` entry is the tree's default (`STAND_INS` name the entries whose key the
  tree does not set, and what stands behind them there);
- each verl key the table maps unchanged onto an rlrun key has rlrun's default there, or is in
  `VERL_DEFAULTS`, so a command line that leaves it out gets verl's value (`ACCEPTED` says why
  the few others change nothing trained).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from rlrun.convert.conversion import _at, _flatten, read_yaml
from rlrun.facts.verl_keys import TABLE, VERL_DEFAULTS, VERL_VERSION
from rlrun.schema import Recipe

CONFIG = Path("verl") / "trainer" / "config" / "_generated_ppo_trainer.yaml"
VERSION = Path("verl") / "version" / "version"
MANDATORY = "???"  # OmegaConf's value that a run must set

# VERL_DEFAULTS entries the generated config does not hold as such: the key verl reads instead
# and its value there.
STAND_INS: dict[str, tuple[str, Any]] = {
    # without a mixed_precision section verl's FSDP engine computes in fsdp_config.dtype
    "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype": (
        "actor_rollout_ref.actor.fsdp_config.dtype",
        "bfloat16",
    ),
    # mandatory in verl (every script names its engine); rlrun reads a command line without it as vLLM
    "actor_rollout_ref.rollout.name": ("actor_rollout_ref.rollout.name", MANDATORY),
}
# Keys mapped unchanged whose verl default is not rlrun's and is not mirrored, and why that
# changes nothing trained.
ACCEPTED = {
    "actor_rollout_ref.model.path": "a placeholder: a run names its model",
    "critic.model.path": "a placeholder: null in rlrun is the policy's model, as verl's scripts set it",
    "data.seed": "the prompt order comes from another generator either way",
    "actor_rollout_ref.actor.optim.warmup_style": "null: the deprecated name defers to lr_scheduler_type",
    "actor_rollout_ref.rollout.free_cache_engine": "vLLM's sleep mode: memory, not numbers",
    "trainer.project_name": "where W&B files the run",
    "trainer.default_local_dir": "where checkpoints go",
}


def differences(tree: Path) -> list[str]:
    """What in the tree disagrees with the mirror, one line each (empty when nothing does)."""
    found = []
    version = (tree / VERSION).read_text(encoding="utf-8").strip()
    if version != VERL_VERSION:
        found.append(f"the tree is verl {version}; rlrun/facts/verl_keys.py describes verl {VERL_VERSION}")
    text = (tree / CONFIG).read_text(encoding="utf-8")
    settings, _ = read_yaml(text)
    raw: dict[str, Any] = {}
    _flatten(yaml.safe_load(text), "", raw)
    for key, mirrored in VERL_DEFAULTS.items():
        where, expected = STAND_INS.get(key, (key, mirrored))
        actual = settings.get(where, "<absent>")
        if not _same(actual, expected):
            found.append(f"VERL_DEFAULTS[{key!r}] = {mirrored!r}, but the tree has {where} = {actual!r}")
    rlrun_defaults = Recipe().model_dump(mode="json")
    for key, row in TABLE.items():
        if row.rlrun is None or row.convert or key not in settings or key in VERL_DEFAULTS or key in ACCEPTED:
            continue
        if str(raw.get(key)).startswith("${"):
            continue  # it follows the key it names (rollout.response_length: data.max_response_length)
        if not _same(settings[key], _at(rlrun_defaults, row.rlrun)):
            found.append(
                f"{key} defaults to {settings[key]!r} in the tree and {row.rlrun} to "
                f"{_at(rlrun_defaults, row.rlrun)!r} in rlrun: add it to VERL_DEFAULTS"
            )
    return found


def _same(a: Any, b: Any) -> bool:
    """Equal as values: 0 and 0.0 are, True and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree", type=Path, help="a verl source tree (checkout, unpacked wheel or sdist)")
    args = parser.parse_args(argv)
    missing = [path for path in (CONFIG, VERSION) if not (args.tree / path).is_file()]
    if missing:
        print(f"{args.tree}: no {missing[0]}; not a verl source tree", file=sys.stderr)
        return 2
    found = differences(args.tree)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} difference(s) from rlrun/facts/verl_keys.py", file=sys.stderr)
        return 1
    print(f"rlrun/facts/verl_keys.py agrees with verl {VERL_VERSION} in {args.tree}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
