"""`rlrun eval`: a checkpoint or a Hugging Face model, evaluated outside a run with the recipe's
data, rewards and `trainer.eval` settings — through the same `evaluate_recipe` the training
loop calls, on a model rebuilt exactly as the run built it (a LoRA checkpoint: the recipe's
base model wrapped by peft, the adapter loaded), so a checkpoint's figures equal the run's own
`val/*` at that step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from rich.console import Group
from rich.table import Table
from rich.text import Text
from transformers.utils import logging as hf_logging

from rlrun.data import load_prompt_datasets
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.evaluation import EvalResult, build_agent_spec, evaluate_recipe, reward_functions
from rlrun.recipes.yaml_io import load_yaml
from rlrun.records import checkpoint as ckpt
from rlrun.records.rundir import CHECKPOINTS, META, RESOLVED, holds_run, read_meta
from rlrun.rewards import RewardCombiner
from rlrun.schema import Recipe
from rlrun.training.models import load_causal_lm, load_tokenizer, with_lora
from rlrun.training.rollout_engine import build_rollout_engine
from rlrun.training.session import on_cpu


@dataclass(frozen=True)
class EvalTarget:
    """What `rlrun eval` was pointed at."""

    model: str  # a checkpoint directory, a model directory, an `rlrun:` name or a hub id
    checkpoint: Path | None  # set when `model` is a run's checkpoint
    run_recipe: Path | None  # the run's `resolved.yaml`, the default recipe of a checkpoint


def eval_target(model: str, warn: Callable[[str], None]) -> EvalTarget:
    """Recognise a run directory (its newest intact checkpoint; newer damaged ones are named and
    skipped) or a run checkpoint (verified: a damaged one is refused), and find the run's recipe.
    Anything else is a model to load as it is."""
    path = Path(model)
    if (path / RESOLVED).is_file() and holds_run(path):
        read_meta(path / META)  # a run this rlrun can read: a damaged or newer record is refused
        latest = ckpt.latest_intact_checkpoint(path / CHECKPOINTS, warn=warn)
        if latest is None:
            raise RecipeError(
                [
                    ConfigIssue(
                        f"the run {path} has no checkpoint to evaluate",
                        code="no-checkpoint",
                        file=str(path),
                        fix="evaluate a run that saved a checkpoint (trainer.checkpoint.every_steps), or a model",
                    )
                ]
            )
        path, model = latest, str(latest)
    elif not _is_checkpoint(path):
        return EvalTarget(model, None, None)
    else:
        ckpt.check_checkpoint(path, warn=warn)
    resolved = path.parent.parent / RESOLVED  # RUN_DIR/checkpoints/step_N
    return EvalTarget(model, path, resolved if resolved.is_file() else None)


def _is_checkpoint(path: Path) -> bool:
    """A run's checkpoint folder, even with files missing (a plain model folder is none of these)."""
    in_a_run = path.parent.name == CHECKPOINTS and ckpt.step_of(path) is not None
    return path.is_dir() and (
        in_a_run or any((path / f).is_file() for f in (ckpt.TRAINER_STATE, ckpt.CHECKSUMS))
    )


def evaluate_target(target: EvalTarget, recipe: Recipe) -> tuple[EvalResult, str]:
    """Evaluate `target` on `recipe`'s validation data; returns the result and the data's name."""
    hf_logging.disable_progress_bar()  # a loading bar per model would bury the table
    tokenizer = load_tokenizer(
        str(target.checkpoint) if target.checkpoint else recipe.model.tokenizer or target.model,
        recipe.model.trust_remote_code,
    )
    _, val_data = load_prompt_datasets(recipe.data, tokenizer)
    if val_data is None:
        raise RecipeError(
            [
                ConfigIssue(
                    f"the data source {recipe.data.source!r} has no validation split to evaluate on",
                    key="data.val_source",
                    code="no-validation-data",
                    fix="name the evaluation data: `rlrun eval MODEL --data FILE` (or set `data.val_source`)",
                )
            ]
        )
    agent = build_agent_spec(recipe, tokenizer)
    reward = RewardCombiner(reward_functions(recipe, agent))
    device = Accelerator(cpu=on_cpu(recipe)).device
    model = _load_policy(target, recipe).to(device)
    engine = build_rollout_engine(recipe, model, tokenizer)
    return evaluate_recipe(engine, tokenizer, val_data, recipe, reward, agent=agent), _val_data_name(recipe)


def _val_data_name(recipe: Recipe) -> str:
    return recipe.data.val_source or f"{recipe.data.source} (validation)"


def _load_policy(target: EvalTarget, recipe: Recipe) -> torch.nn.Module:
    """The model as the run held it: a full checkpoint loads directly; a LoRA checkpoint is the
    recipe's base model with the recipe's adapter, its weights loaded from the checkpoint."""
    m = recipe.model
    if target.checkpoint is None or not ckpt.is_lora_checkpoint(target.checkpoint):
        return load_causal_lm(target.model, m.dtype, m.trust_remote_code, trainable=False)
    if m.lora is None:
        raise RecipeError(
            [
                ConfigIssue(
                    f"{target.checkpoint} holds a LoRA adapter, but the recipe has no `model.lora` to rebuild it",
                    key="model.lora",
                    code="lora-checkpoint",
                    fix="evaluate with the run's own recipe (the default), or export a merged model first "
                    "(`rlrun export CHECKPOINT OUT`)",
                )
            ]
        )
    model = with_lora(load_causal_lm(m.path, m.dtype, m.trust_remote_code, trainable=False), m.lora)
    ckpt.load_policy_weights(target.checkpoint, model)
    return model.eval()


def eval_overrides(*, data: str | None, rewards: list[str], k: int | None, prompts: int | None) -> list[str]:
    """`rlrun eval`'s flags as the recipe overrides they stand for (after the user's own)."""
    changes = [f"data.val_source={json.dumps(data)}"] if data is not None else []
    if rewards:
        changes.append(f"reward.functions={json.dumps([reward_entry(text) for text in rewards])}")
    if k is not None:
        changes += [f"trainer.eval.k={k}", f"trainer.eval.greedy={str(k == 1).lower()}"]
    return changes + ([f"trainer.eval.prompts={prompts}"] if prompts is not None else [])


def reward_entry(text: str) -> Any:
    """`--reward` text: a YAML mapping (`{model: ..., weight: ...}`) as is, anything else a function name."""
    value = load_yaml(text, override=f"--reward {text}") if text.lstrip().startswith("{") else None
    return value if isinstance(value, dict) else {"fn": text}


def eval_report(model: str, recipe_path: Path, data_name: str, result: EvalResult) -> dict[str, Any]:
    """What `rlrun eval --json` prints and `--out` writes."""
    return {
        "model": model,
        "recipe": str(recipe_path),
        "data": data_name,
        "num_prompts": result.num_prompts,
        "k": result.k,
        "greedy": result.greedy,
        "metrics": result.metrics(),
    }


def eval_table(report: dict[str, Any]) -> Group:
    """`rlrun eval`'s printout: a line naming model, data and k, then the metrics."""
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in report["metrics"].items():
        table.add_row(name, f"{value:.4f}")
    greedy = " (greedy)" if report["greedy"] else ""
    header = (
        f"{report['model']} on {report['data']}: {report['num_prompts']} prompts, k={report['k']}{greedy}"
    )
    return Group(Text(header), table)
