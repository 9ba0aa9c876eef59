"""`rlrun eval`: a checkpoint or model scored on a recipe's validation data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from rlrun.cli._app import OverridesArg, app, console, err_console, fail, refuse_output_file, user_errors
from rlrun.recipes import load_recipe

ModelArg = Annotated[
    str,
    typer.Argument(
        help="A run checkpoint (`runs/x/checkpoints/step_000100`, LoRA "
        "included), a run directory (its latest checkpoint), a Hugging Face "
        "model directory, an `rlrun:` model or a hub id.",
        show_default=False,
    ),
]
RecipeOpt = Annotated[
    str | None,
    typer.Option(
        "--recipe",
        help="The recipe whose data, rewards and "
        "`trainer.eval` settings to use (default: a checkpoint's own "
        "run recipe, else `base`).",
        show_default=False,
    ),
]
DataOpt = Annotated[
    str | None,
    typer.Option(
        "--data",
        help="Evaluate on this data source instead (sets `data.val_source`).",
        show_default=False,
    ),
]
RewardOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--reward",
        help="A reward entry replacing the "
        "recipe's (repeatable): `rlrun:exact_match`, "
        "`pkg.module:function`, or a YAML mapping such as "
        "`{model: rlrun:tiny-reward, weight: 1.0}`.",
        show_default=False,
    ),
]
KOpt = Annotated[
    int | None,
    typer.Option(
        "-k",
        "--k",
        min=1,
        help="Samples per prompt (sets `trainer.eval.k`; k > 1 samples at the rollout temperature).",
        show_default=False,
    ),
]
PromptsOpt = Annotated[
    int | None,
    typer.Option(
        "--prompts",
        min=1,
        help="Evaluate the first N prompts (sets `trainer.eval.prompts`).",
        show_default=False,
    ),
]
OutOpt = Annotated[
    Path | None,
    typer.Option(
        "--out",
        help="Also write the result as JSON to this file (an existing file is not overwritten).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON instead of a table.")]


@app.command("eval")
def eval_command(
    model: ModelArg,
    overrides: OverridesArg = None,
    recipe: RecipeOpt = None,
    data: DataOpt = None,
    reward: RewardOpt = None,
    k: KOpt = None,
    prompts: PromptsOpt = None,
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a checkpoint or model on a recipe's validation data with its rewards: mean@k, pass@k,
    maj@k, mean reward per component and response lengths — the same evaluation a run logs as
    `val/*`, so a checkpoint reproduces its run's figures at that step."""
    from rlrun.embedded import UnknownEmbeddedModelError
    from rlrun.training.checkpoint_eval import (
        eval_overrides,
        eval_report,
        eval_table,
        eval_target,
        evaluate_target,
    )

    with user_errors(as_json):
        target = eval_target(model, warn=lambda text: err_console.print(f"[yellow]{text}[/]"))
    refuse_output_file(out, "--out", make_folder=True)
    with user_errors(as_json):
        changes = [*(overrides or []), *eval_overrides(data=data, rewards=reward or [], k=k, prompts=prompts)]
        loaded = load_recipe(
            recipe or target.run_recipe or "base",
            changes,
            run_record=recipe is None and target.run_recipe is not None,
        )
    try:
        with user_errors(as_json):
            result, data_name = evaluate_target(target, loaded.recipe)
    except (OSError, UnknownEmbeddedModelError) as exc:  # no such model: the user's path, not a bug
        raise fail(f"cannot load {model!r}: {exc}") from None
    report = eval_report(target.model, loaded.source_path, data_name, result)  # RUN_DIR: its checkpoint
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    if as_json:
        print(json.dumps(report, indent=2))
        return
    console.print(eval_table(report), soft_wrap=True)  # the header quotes paths whole
    if out is not None:
        console.print(f"wrote {out}")
