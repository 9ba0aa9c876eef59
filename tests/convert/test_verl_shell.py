"""verl launch scripts read as bash reads them (quotes, continuations, variables, arithmetic,
env prefixes, `ray job submit --`), and every input a user may give ends in a recipe or an exit-2
message naming what is wrong: never a traceback."""

import textwrap

import pytest
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.convert.conversion import ConvertError
from rlrun.convert.verl import VerlRun, convert, read_script

runner = CliRunner()


def settings_of(script: str, environ: dict | None = None) -> dict:
    return read_script(textwrap.dedent(script), environ or {}).settings


def test_multi_line_quotes_and_continuations():
    script = r"""
    FILES="['a.parquet',
            'b.parquet']"
    python3 -m verl.trainer.main_ppo \
        data.train_files="$FILES" \
        trainer.project_name='it is "quoted"' \
        data.train_batch_size=8 \
    """
    settings = settings_of(script)
    assert settings["data.train_files"] == ["a.parquet", "b.parquet"]
    assert settings["trainer.project_name"] == 'it is "quoted"'
    assert settings["data.train_batch_size"] == 8  # the trailing backslash before a blank line ends it


def test_defaults_arithmetic_and_the_environment():
    script = """
    n=${N:-4}
    gen=$((n * 3 + 1))
    : ${SET_HERE:=7}
    python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=$n data.gen_batch_size=$gen \\
        data.train_batch_size=${SET_HERE} trainer.nnodes=${NODES:-"2"} trainer.n_gpus_per_node=$GPUS
    """
    settings = settings_of(script, {"GPUS": "4"})
    assert settings["actor_rollout_ref.rollout.n"] == 4 and settings["data.gen_batch_size"] == 13
    assert settings["data.train_batch_size"] == 7 and settings["trainer.nnodes"] == 2
    assert settings["trainer.n_gpus_per_node"] == 4
    assert settings_of(script, {"N": "2"})["data.gen_batch_size"] == 7


@pytest.mark.parametrize(
    "line",
    [
        "CUDA_VISIBLE_DEVICES=0,1 VLLM_USE_V1=1 python3 -m verl.trainer.main_ppo data.train_batch_size=8",
        (
            "ray job submit --address=http://x:8265 --runtime-env=r.yaml -- python3 -m verl.trainer.main_ppo "
            "data.train_batch_size=8"
        ),
        "env HYDRA_FULL_ERROR=1 python -m verl.trainer.main_ppo data.train_batch_size=8 2>&1 | tee log.txt",
        "nohup python3 -m verl.trainer.main_ppo data.train_batch_size=8 > out.log &",
    ],
)
def test_the_verl_command_behind_prefixes(line):
    assert settings_of(line) == {"data.train_batch_size": 8}


def test_heredocs_arrays_elsewhere_and_unquoted_word_splitting():
    script = """
    cat <<EOF > get.py
    print('it's a here-document: not shell')
    EOF
    nodes=($(scontrol show hostnames))
    head=${nodes[0]}
    EXTRA="actor_rollout_ref.rollout.n=4 data.train_batch_size=16"
    python3 -m verl.trainer.main_ppo $EXTRA trainer.total_epochs=2 $@
    """
    assert settings_of(script) == {
        "actor_rollout_ref.rollout.n": 4,
        "data.train_batch_size": 16,
        "trainer.total_epochs": 2,
    }


def test_a_value_only_the_running_shell_knows_is_named_when_it_matters():
    script = """
    python3 -m verl.trainer.main_ppo trainer.nnodes=${SLURM_JOB_NUM_NODES} \\
        trainer.experiment_name=run-$(date +%s) data.train_files=x.parquet trainer.total_training_steps=5
    """
    run = read_script(textwrap.dedent(script), {})
    with pytest.raises(ConvertError) as refused:
        convert(run)
    assert "trainer.nnodes=${SLURM_JOB_NUM_NODES}: it waits on $SLURM_JOB_NUM_NODES, not set here" in str(
        refused.value
    )
    assert "experiment_name" not in str(refused.value)  # a name changes nothing trained
    run = read_script(textwrap.dedent(script), {"SLURM_JOB_NUM_NODES": "2"})
    assert run.settings["trainer.nnodes"] == 2


def test_a_variable_set_from_the_environment_names_the_variable_the_user_can_set():
    script = """
    NNODES=${SLURM_JOB_NUM_NODES}
    export NNODES
    NODES=${NNODES:-1}  # set (to a value only the running shell knows): the default does not apply
    python3 -m verl.trainer.main_ppo trainer.nnodes="${NNODES}" trainer.n_gpus_per_node=$NODES
    """
    settings = settings_of(script)
    assert settings["trainer.nnodes"].names == ("$SLURM_JOB_NUM_NODES (through $NNODES)",)
    assert settings["trainer.n_gpus_per_node"].names == ("$SLURM_JOB_NUM_NODES (through $NODES)",)
    assert settings_of(script, {"SLURM_JOB_NUM_NODES": "2"})["trainer.nnodes"] == 2


def test_an_output_folder_or_logger_only_the_running_shell_knows_is_reported_not_refused():
    script = """
    CKPTS_DIR=/ckpts/$(basename $MODEL_PATH)
    python3 -m verl.trainer.main_ppo data.train_files=x.parquet trainer.total_training_steps=5 \\
        trainer.default_local_dir=${CKPTS_DIR} trainer.project_name=${WANDB_PROJECT}
    """
    conversion = convert(read_script(textwrap.dedent(script), {}))
    report = conversion.report()
    assert (
        "trainer.default_local_dir=${CKPTS_DIR} -> trainer.output_dir  [it waits on the "
        "command substitution $(basename $MODEL_PATH) (through $CKPTS_DIR), not set here: rlrun's default stays]"
    ) in report
    assert (
        "trainer.project_name=${WANDB_PROJECT} -> logging.wandb.project  [it waits on $WANDB_PROJECT"
        in report
    )
    assert "output_dir" not in conversion.recipe["trainer"] and "logging" not in conversion.recipe


@pytest.mark.parametrize(
    ("script", "settings"),
    [
        # `$@` at the end (verl's examples): the arguments follow, and a key given twice is the last one's
        ("python3 -m verl.trainer.main_ppo a.b=1 c.d=2 $@\n", {"a.b": 1, "c.d": 3, "e.f": 4}),
        # bash puts them where `"$@"` stands: the script's own later words win
        ('python3 -m verl.trainer.main_ppo a.b=1 "$@" c.d=2\n', {"a.b": 1, "c.d": 2, "e.f": 4}),
        ("python3 -m verl.trainer.main_ppo ${@} a.b=1\n", {"a.b": 1, "c.d": 3, "e.f": 4}),
        # $1 is the first one
        ('python3 -m verl.trainer.main_ppo a.b="$1" $@\n', {"a.b": "c.d=3", "c.d": 3, "e.f": 4}),
    ],
)
def test_the_scripts_arguments_go_where_bash_puts_them(script, settings):
    run = read_script(script, {}, ["c.d=3", "e.f=4"])
    assert run.settings == settings and run.notes == []


def test_arguments_a_script_does_not_pass_on_follow_its_words_with_a_note():
    run = read_script("python3 -m verl.trainer.main_ppo a.b=1 c.d=2\n", {}, ["c.d=3"])
    assert run.settings == {"a.b": 1, "c.d": 3}
    assert run.notes == [
        "the script's verl command has no $@, so bash would not pass it c.d=3; rlrun applied them after its own settings"
    ]


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("python3 -m verl.trainer.main_ppo data.train_files='x.parquet\n", "line 1: the single quote"),
        ('python3 -m verl.trainer.main_ppo trainer.project_name="x\n', "line 1: the double quote"),
        ("ARGS=(a=1 b=2)\npython3 -m verl.trainer.main_ppo ${ARGS[@]}\n", "bash array `ARGS`"),
        ("ARGS=(a=1)\npython3 -m verl.trainer.main_ppo ${ARGS[@]}\n", "write its values out as key=value"),
        ("python3 -m verl.trainer.main_ppo trainer.project_name='${oc.env:USER}'\n", "Hydra interpolation"),
        ("python3 -m verl.trainer.main_ppo data.train_batch_size=8 \\  # comment\n  x=1\n", "only spaces"),
        ("python3 -m verl.trainer.main_ppo $((\n", "never closed"),
        ("echo nothing here\n", "no command running verl's trainer"),
        ("python3 -m recipe.prime.main_prime data.train_batch_size=8\n", "runs recipe.prime.main_prime"),
    ],
)
def test_scripts_rlrun_cannot_read_are_refused_with_the_reason(tmp_path, monkeypatch, script, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "run.sh").write_text(script)
    result = runner.invoke(app, ["convert", "verl", "run.sh"])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()) and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["data.train_batch_size=eight", "trainer.total_training_steps=4"], "data.train_batch_size=eight"),
        (
            ["trainer.n_gpus_per_node=eight", "trainer.total_training_steps=4"],
            "trainer.n_gpus_per_node=eight",
        ),
        (["actor_rollout_ref.rollout.n=two", "trainer.total_training_steps=4"], "rollout.n=two"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_naming_the_key(args, message):
    result = runner.invoke(app, ["convert", "verl", *args])
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_files_rlrun_cannot_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latin1.sh").write_bytes(b"python3 -m verl.trainer.main_ppo trainer.project_name=caf\xe9\n")
    result = runner.invoke(app, ["convert", "verl", "latin1.sh"])
    assert result.exit_code == 2 and "latin1.sh: not UTF-8 text" in result.output
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    (tmp_path / "bomb.yaml").write_text(bomb)
    result = runner.invoke(app, ["convert", "verl", "bomb.yaml"])
    assert result.exit_code == 2 and "aliases expand to more than" in result.output


def test_the_run_names_its_trainer():
    run = read_script("python3 -m recipe.dapo.main_dapo data.gen_batch_size=8\n", {})
    assert run.trainer == "recipe.dapo.main_dapo"
    assert isinstance(run, VerlRun)


def test_a_hydra_interpolation_in_a_config_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = (
        "data:\n  train_files: ${oc.env:HOME}/train.parquet\ntrainer:\n  experiment_name: x-${oc.env:USER}\n"
    )
    (tmp_path / "verl.yaml").write_text(text)
    result = runner.invoke(app, ["convert", "verl", "verl.yaml"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "data.train_files=${oc.env:HOME}/train.parquet" in result.output
    assert "the Hydra interpolation ${oc.env:HOME}" in " ".join(result.output.split())
    assert "experiment_name" not in result.output  # a name changes nothing trained
