"""The `agent` section validated before any model loads, and the episode plan `validate` shows."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.recipes.agent import episode_plan
from tests.agents.byte_tokenizer import TOOLS_TEMPLATE, byte_tokenizer

FIXTURES = Path(__file__).parents[1] / "agents" / "fixtures"
ENVS = "tests.agents.envs_fixture"
TOOLS_MODULE = '''
def echo(word: str) -> str:
    """Echo a word.

    Args:
        word: The word.
    """
    return word


def undocumented(x: int) -> int:
    return x
'''


@pytest.fixture
def head(tmp_path):
    """The start of an agent recipe: grpo with a tokenizer that can write `<call>...</call>`
    (rlrun:tiny-base's cannot, which is refused)."""
    folder = tmp_path / "byte-tokenizer"
    byte_tokenizer().save_pretrained(folder)
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    return f"extends: grpo\nmodel:\n  tokenizer: {folder}\n"


@pytest.fixture
def tools_module(tmp_path, monkeypatch):
    (tmp_path / "agent_tools_mod.py").write_text(TOOLS_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    import sys

    sys.modules.pop("agent_tools_mod", None)


def test_a_valid_agent_recipe_and_its_episode_plan(write, head):
    path = write(
        "agent.yaml",
        head + "rollout:\n  max_response_tokens: 64\nagent:\n  enabled: true\n"
        f"  tools: [rlrun:calculator]\n  environment: {ENVS}:Counter\n  max_turns: 3\n  max_turn_tokens: 16\n",
    )
    loaded = load_recipe(path)
    # Counter has get_reward: it scores the episodes beside reward.functions, as TRL's would
    assert [(n.code, n.key) for n in loaded.notices] == [("agent-environment-reward", "agent.environment")]
    plan = episode_plan(loaded.recipe)
    assert (plan.episodes, plan.max_turns, plan.max_turn_tokens, plan.max_episode_tokens) == (128, 3, 16, 64)
    assert plan.max_sampled_tokens == 48  # 3 turns x 16 tokens, within the 64 of the episode
    assert plan.tools == ["rlrun:calculator"] and plan.environments == [f"{ENVS}:Counter"]
    assert episode_plan(load_recipe("grpo").recipe) is None


def test_validate_prints_the_episode_plan_and_its_json(write, head):
    path = write("agent.yaml", head + "agent:\n  enabled: true\n  tools: [rlrun:calculator]\n")
    result = CliRunner().invoke(app, ["validate", str(path), "rollout.max_response_tokens=40"])
    assert result.exit_code == 0, result.output
    assert "Episode plan per step" in result.stdout and "the tokens the model sampled" in result.stdout
    report = json.loads(CliRunner().invoke(app, ["validate", str(path), "--json"]).stdout)
    assert report["episode_plan"]["max_turns"] == 4 and report["episode_plan"]["format"] == "plain"


def test_every_problem_is_located_at_its_key(write, head, tools_module, errors):
    path = write(
        "bad.yaml",
        head + "agent:\n"
        "  enabled: true\n"
        "  tools:\n"
        "    - rlrun:calc\n"
        "    - agent_tools_mod:undocumented\n"
        "    - agent_tools_mod:echo\n"
        "    - agent_tools_mod:echo\n"
        f"  environment: {ENVS}:Undocumented\n",
    )
    issues = {issue.key: issue for issue in errors(path)}
    assert set(issues) == {"agent.tools.0", "agent.tools.1", "agent.tools.3", "agent.environment"}
    assert (issues["agent.tools.0"].line, issues["agent.tools.1"].line) == (7, 8)
    assert issues["agent.tools.0"].message.startswith("unknown built-in tool 'rlrun:calc'")
    assert "cannot be described to the model" in issues["agent.tools.1"].message
    assert issues["agent.tools.3"].message == "agent.tools.2 is named 'echo' too"
    assert "Undocumented.move" in issues["agent.environment"].message
    assert all(issue.code == "agent-import" for issue in issues.values())


def test_no_import_only_looks_the_modules_up(write, head):
    path = write(
        "bad.yaml", head + f"agent:\n  enabled: true\n  tools: [no_such_module_q:f, {ENVS}:Undocumented]\n"
    )
    with pytest.raises(RecipeError) as info:
        load_recipe(path, import_modules=False)
    (issue,) = info.value.issues
    assert (issue.key, issue.message) == ("agent.tools.0", "the module 'no_such_module_q' was not found")


@pytest.mark.parametrize(
    ("body", "key", "code"),
    [
        ("  enabled: true\n", "agent.enabled", "agent-empty"),
        (
            f"  enabled: true\n  environment: {ENVS}:Counter\n  environments: {{a: {ENVS}:Guess}}\n",
            "agent.environment",
            "agent-environment-twice",
        ),
        (
            "  enabled: true\n  tools: [rlrun:calculator]\n  chat_template: t.jinja\n",
            "agent.chat_template",
            None,
        ),
        (
            "  enabled: true\n  tools: [rlrun:calculator]\n  format: chat_template\n  describe_tools: true\n",
            "agent.describe_tools",
            "agent-format-setting",
        ),
    ],
)
def test_shapes_that_cannot_work_are_refused(write, errors, body, key, code):
    path = write("bad.yaml", "extends: grpo\nagent:\n" + body)
    issues = [i for i in errors(path) if i.key == key]
    assert issues, [i.format() for i in errors(path)]
    assert code is None or issues[0].code == code


def test_a_missing_template_file_is_refused_relative_to_the_recipe(write, tmp_path, errors):
    path = write(
        "exp/bad.yaml",
        "extends: grpo\nagent:\n  enabled: true\n  tools: [rlrun:calculator]\n"
        "  format: chat_template\n  chat_template: tools.jinja\n",
    )
    (issue,) = [i for i in errors(path) if i.code == "agent-chat-template"]
    assert issue.found == json.dumps(str(tmp_path / "exp" / "tools.jinja"))
    shutil.copy(TOOLS_TEMPLATE, tmp_path / "exp" / "tools.jinja")
    assert load_recipe(path).recipe.agent.chat_template == str(tmp_path / "exp" / "tools.jinja")


def test_a_minimum_response_length_is_refused(write, head, errors):
    path = write(
        "bad.yaml",
        head + "rollout:\n  min_response_tokens: 2\nagent:\n  enabled: true\n  tools: [rlrun:calculator]\n",
    )
    assert [i.code for i in errors(path)] == ["agent-min-tokens"]


def test_a_template_without_tool_support_is_refused_here_unless_one_is_supplied(write, tmp_path, errors):
    """A model folder whose tokenizer has SmolLM2's own template: refused (it renders no tools), unless
    agent.chat_template names one with tool support; with --portable it is not checked here."""
    model = tmp_path / "smol"
    byte_tokenizer(
        eos="<|im_end|>", chat_template=(FIXTURES / "smollm2_135m_instruct.jinja").read_text()
    ).save_pretrained(model)
    (model / "config.json").write_text('{"model_type": "llama"}')
    body = (
        f"extends: grpo\nmodel:\n  path: {model}\nagent:\n  enabled: true\n  tools: [rlrun:calculator]\n"
        "  format: chat_template\n"
    )
    path = write("smol.yaml", body)
    (issue,) = [i for i in errors(path) if i.code == "agent-chat-template"]
    assert issue.key == "agent.format" and "does not render the tools' descriptions" in issue.message
    load_recipe(path, environment=False)  # --portable: for another machine
    shutil.copy(TOOLS_TEMPLATE, tmp_path / "tools.jinja")
    load_recipe(write("smol_fixed.yaml", body + "  chat_template: tools.jinja\n"))


def test_the_documented_refusal_of_smollm2s_own_template(monkeypatch):
    """docs/agents.md's command as written, from the repository, once the embedded SmolLM2 is on
    this machine (validation reads a tokenizer only then; it converts nothing)."""
    from rlrun.embedded import resolve_model_path

    resolve_model_path("rlrun:smollm2-135m-instruct")
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    result = CliRunner().invoke(app, ["validate", "examples/agents/calculator.yaml", "~agent.chat_template"])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.replace("│", " ").split())
    assert (
        "examples/agents/calculator.yaml, line 12, column 3, `agent.format`: the chat template has no tool"
        in flat
    )
    assert "Traceback" not in result.output


def test_agent_settings_while_it_is_off_are_a_notice(write):
    path = write("off.yaml", "extends: grpo\nagent:\n  tools: [rlrun:calculator]\n  max_turns: 2\n")
    (notice,) = load_recipe(path).notices
    assert (notice.key, notice.code, notice.line) == ("agent.max_turns", "agent-disabled", 4)
    assert notice.found == "agent.max_turns, agent.tools"


def test_a_turn_longer_than_an_episode_is_a_notice(write, head):
    path = write(
        "long.yaml",
        head + "agent:\n  enabled: true\n  tools: [rlrun:calculator]\n  max_turn_tokens: 50\n",
    )
    (notice,) = load_recipe(path, ("rollout.max_response_tokens=20",)).notices
    assert notice.code == "agent-turn-longer-than-episode" and notice.key == "rollout.max_response_tokens"


def test_a_tokenizer_that_cannot_write_the_plain_format_is_refused(write, errors):
    """rlrun:tiny-base reads `<call>` back as `call`: its model could never call a tool. A step
    environment needs no calls, and with --portable the tokenizer is not looked at."""
    path = write("tiny.yaml", "extends: grpo\nagent:\n  enabled: true\n  tools: [rlrun:calculator]\n")
    (issue,) = errors(path)
    assert (issue.key, issue.code) == ("agent.format", "agent-plain-format")
    assert "reads back as 'callf(a,1)/callresulterror:x/result'" in issue.message.replace(", ", ",").replace(
        ": ", ":"
    )
    load_recipe(path, environment=False)
    load_recipe(write("step.yaml", f"extends: grpo\nagent:\n  enabled: true\n  environment: {ENVS}:Guess\n"))


def test_rewards_may_be_left_to_the_environment_only_when_it_has_get_reward(write, head, errors):
    no_reward = "reward:\n  functions: []\n"
    scored = write(
        "scored.yaml", head + no_reward + f"agent:\n  enabled: true\n  environment: {ENVS}:Counter\n"
    )
    assert not [n for n in load_recipe(scored).notices if n.code == "no-reward"]
    unscored = write(
        "unscored.yaml", head + no_reward + f"agent:\n  enabled: true\n  environment: {ENVS}:Guess\n"
    )
    assert [(i.code, i.key) for i in errors(unscored)] == [("no-reward", "reward.functions")]


def test_an_estimator_that_compares_positions_is_refused_for_episodes(write, head, errors):
    path = write(
        "otb.yaml",
        head + "algorithm:\n  advantage: optimal_token_baseline\nagent:\n  enabled: true\n"
        "  tools: [rlrun:calculator]\n",
    )
    assert [(i.code, i.key) for i in errors(path)] == [("agent-estimator", "algorithm.advantage")]


def test_the_few_shot_example_shows_three_calls_before_each_question(monkeypatch):
    """examples/agents/calculator_few_shot.yaml as written: each episode's prompt is the tools,
    the three worked examples with their calls in the template's own format, then the row's
    question (the embedded SmolLM2's tokenizer, the example's template)."""
    from rlrun.agents.formats import Prompt
    from rlrun.data import load_prompt_datasets
    from rlrun.embedded import resolve_model_path
    from rlrun.evaluation import build_agent_spec
    from rlrun.training.models import load_tokenizer

    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    sizes = ["data.arithmetic.train_size=2", "data.arithmetic.val_size=2"]
    recipe = load_recipe("examples/agents/calculator_few_shot.yaml", sizes).recipe
    tokenizer = load_tokenizer(resolve_model_path(recipe.model.path))
    train, _ = load_prompt_datasets(recipe.data, tokenizer)
    agent = build_agent_spec(recipe, tokenizer)
    ids = agent.format.prompt_ids(Prompt(train.prompt_ids[0], train.messages[0]), list(agent.tools))
    text = tokenizer.decode(ids)
    calls = [
        f'<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{e}"}}}}\n</tool_call>'
        for e in ("12*34", "507*83", "641*229")
    ]
    assert all(text.count(call) == 1 for call in calls) and text.index(calls[0]) < text.index(calls[2])
    assert "<tool_response>\n146789\n</tool_response>" in text
    question = train.messages[0][-1]["content"]
    assert question.endswith("? Use the calculator, then answer with only the number.") and "*" in question
    assert text.endswith(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
