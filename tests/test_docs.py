"""Every `rlrun` command shown in a ```bash block of the README or a docs/ page runs in a test.

Cheap commands (they read recipes, nothing loads a model) run here, exactly as written, from a clean
folder. The others train, sweep, evaluate or launch processes: each is mapped to the existing test
that runs it, and a doc command that is neither cheap nor mapped fails, so a new one needs a test.
"""

from __future__ import annotations

import ast
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlrun.cli import app

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CHEAP = {"validate", "show", "schema", "recipes", "components"}  # read recipes, load no model
FOLDERS = ("recipes", "examples", "sweeps")  # what a command may name relative to a clone

# command as written -> the test that runs it (file::function)
MAPPED = {
    "rlrun train recipes/dapo.yaml": "tests/test_readme.py::test_the_readme_train_command_runs_from_a_clean_folder",
    "rlrun train grpo actor.optimizer.lr=1e-4 --name lr1e-4": (
        "tests/compare/test_compare_real_runs.py::test_header_and_config_diff"
    ),
    "rlrun train recipes/ppo.yaml --dry-run": "tests/training/test_end_to_end.py::test_dry_run_writes_nothing",
    "rlrun train grpo --profile --name prof": (
        "tests/training/test_end_to_end.py::test_profile_records_the_loop_phases_of_steps_2_to_4"
    ),
    "rlrun resume runs/lr1e-4": (
        "tests/training/test_end_to_end.py::test_kill_9_then_resume_ends_exactly_like_an_uninterrupted_run"
    ),
    "rlrun train real/grpo_smollm2": (
        "tests/embedded/test_gguf.py::"
        "test_the_real_recipe_trains_2_steps_and_its_checkpoint_loads_with_plain_transformers"
    ),
    "rlrun train recipe.yaml --num-processes 8": "tests/test_cli.py::test_train_relaunches_with_the_recipes_strategy",
    "rlrun train recipe.yaml --num-processes 16 --num-machines 2 --machine-rank 0 --main-process-ip 10.0.0.1 "
    "--main-process-port 29500": "tests/test_launch.py::test_ddp_command_runs_rlrun_module_with_topology",
    **{
        f"rlrun train recipe.yaml --run-dir /shared/runs/x --num-processes 16 --num-machines 2 --machine-rank {rank} "
        "--main-process-ip 10.0.0.1 --main-process-port 29500": (
            "tests/training/test_multinode.py::"
            "test_two_machines_train_as_two_processes_of_one_machine_into_one_run_directory"
        )
        for rank in (0, 1)
    },
    "rlrun resume /shared/runs/x --num-processes 16 --num-machines 2 --machine-rank 0 --main-process-ip 10.0.0.1 "
    "--main-process-port 29500": (
        "tests/training/test_multinode.py::"
        "test_a_signal_to_either_launcher_stops_both_machines_at_a_saved_step_and_the_job_resumes"
    ),
    "rlrun train recipe.yaml --num-processes 8 --accelerate-config my_accelerate.yaml": (
        "tests/test_launch.py::test_user_accelerate_config_owns_the_strategy"
    ),
    "rlrun resume runs/x --num-processes 4": (
        "tests/test_cli.py::test_resume_relaunches_with_the_topology_and_the_runs_strategy"
    ),
    "rlrun export runs/x/checkpoints/step_000300 merged/": (
        "tests/test_cli.py::test_export_never_writes_into_an_existing_folder_without_overwrite"
    ),
    "rlrun convert verl examples/verl/run_qwen2.5-0.5b_gsm8k_grpo.sh -o grpo_gsm8k.yaml "
    "data.train_files=recipes/gsm8k/sample.parquet data.val_files=recipes/gsm8k/sample.parquet "
    "data.train_batch_size=16 actor_rollout_ref.actor.ppo_mini_batch_size=16": (
        "tests/convert/test_verl.py::test_the_documented_convert_command"
    ),
    "rlrun sweep sweeps/grpo_vs_dapo.yaml --dry-run": (
        "tests/sweep/test_sweep_command.py::test_the_documented_sweep_example_and_file_plan_cleanly"
    ),
    "rlrun sweep sweeps/grpo_vs_dapo.yaml": (
        "tests/sweep/test_sweep_local.py::"
        "test_the_documented_sweep_trains_every_run_compares_and_a_second_call_skips_them"
    ),
    "rlrun compare runs/grpo-vs-dapo": (
        "tests/sweep/test_sweep_local.py::"
        "test_the_documented_sweep_trains_every_run_compares_and_a_second_call_skips_them"
    ),
    "rlrun sweep my_sweep.yaml --executor slurm --partition gpu --gpus-per-run 8 --nodes-per-run 2 --time 240": (
        "tests/sweep/test_sweep_slurm.py::test_the_sbatch_script_asks_for_what_the_options_say"
    ),
    "rlrun eval runs/rlhf_grpo/checkpoints/step_000150": (
        "tests/training/test_checkpoint_eval.py::test_eval_of_a_checkpoint_equals_the_runs_own_validation"
    ),
    "rlrun eval runs/grpo/checkpoints/step_000150 --reward rlrun:exact_match "
    "--reward '{model: rlrun:tiny-reward, score: probability}'": (
        "tests/training/test_checkpoint_eval.py::"
        "test_eval_of_a_model_on_a_file_of_prompts_with_k_samples_and_rewards_named_on_the_command_line"
    ),
    "rlrun eval rlrun:tiny-base --data my_prompts.jsonl -k 8 --out eval.json": (
        "tests/training/test_checkpoint_eval.py::"
        "test_eval_of_a_model_on_a_file_of_prompts_with_k_samples_and_rewards_named_on_the_command_line"
    ),
}


def commands_in(markdown: str) -> list[str]:
    """The `rlrun ...` commands of the ```bash blocks: continuation lines joined, comments cut,
    `a && b` split, whitespace runs made one space."""
    found = []
    for block in re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL):
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            code = re.split(r"\s+#", line, maxsplit=1)[0]
            found += [
                " ".join(part.split()) for part in code.split("&&") if part.strip().startswith("rlrun ")
            ]
    return found


def doc_commands() -> list[str]:
    return list(dict.fromkeys(command for page in PAGES for command in commands_in(page.read_text())))


def is_cheap(command: str) -> bool:
    args = shlex.split(command)[1:]
    return args[0] in CHEAP or "--help" in args


def test_commands_are_read_from_bash_blocks_only():
    page = (
        "```bash\npip install -e . && rlrun train a.yaml   # the # in a comment\n"
        "rlrun sweep s.yaml \\\n    --executor slurm\nls  # rlrun ignored\n```\n"
        "```yaml\nrlrun: not a command\n```\n```console\n$ rlrun compare x\n```\n"
    )
    assert commands_in(page) == ["rlrun train a.yaml", "rlrun sweep s.yaml --executor slurm"]


def test_every_doc_command_is_cheap_or_mapped_to_the_test_that_runs_it():
    commands = set(doc_commands())
    assert commands == {c for c in commands if is_cheap(c)} | set(MAPPED), (
        f"not tested: {sorted(commands - set(MAPPED) - {c for c in commands if is_cheap(c)})}; "
        f"mapped but no longer in a doc page: {sorted(set(MAPPED) - commands)}"
    )


@pytest.mark.parametrize("target", sorted(set(MAPPED.values())))
def test_each_mapped_test_exists(target):
    path, name = target.split("::")
    tree = ast.parse((REPO / path).read_text())
    assert name in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, target


@pytest.mark.parametrize("command", [c for c in doc_commands() if is_cheap(c)])
def test_cheap_doc_command_runs_as_written_from_a_clean_folder(command, tmp_path, monkeypatch):
    args = shlex.split(command)[1:]
    for folder in FOLDERS:
        if any(arg.startswith(f"{folder}/") for arg in args):
            shutil.copytree(REPO / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_the_readme_s_annotated_recipe_validates(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    recipe = readme[readme.index("```yaml\n# my_dapo.yaml\n") + len("```yaml\n") :]
    (tmp_path / "my_dapo.yaml").write_text(recipe[: recipe.index("```")])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "my_dapo.yaml", "--strict"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "16 samples" in text and "steps 150" in text and "rlrun:math_answer" in text  # its own keys
