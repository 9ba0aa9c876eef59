"""The `agent` section checked before any model loads, and the episode plan `validate` shows.

Errors: an enabled agent with nothing to call or step; settings that would do nothing in the
chosen format; tools and environments that do not import or cannot be described to the model
(type hints, Google-style docstrings, `reset`), named twice; with `--no-import` only that their
modules can be found. On this machine (not `--portable`): `rlrun:python` needs the sandbox to
hold, the chat_template format a template with tool support, and the plain format a tokenizer
that can write its calls (the recipe's tokenizer is loaded, not the model, when it is here). Notices: agent settings while
the agent is off, a turn longer than a whole episode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlrun.algorithms.registries import ADVANTAGES
from rlrun.errors import ConfigIssue, show_value
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.names import module_findable
from rlrun.recipes.provenance import Provenance
from rlrun.recipes.rules import PORTABLE_HINT
from rlrun.schema import Recipe


def check_agent(
    recipe: Recipe, provenance: Provenance, *, execute: bool = True, environment: bool = True
) -> tuple[list[ConfigIssue], list[ConfigIssue]]:
    """(errors, notices) of the `agent` section (module docstring)."""
    agent = recipe.agent
    if not agent.enabled:
        return [], list(_settings_while_off(provenance))
    errors = list(_shape(recipe, provenance))
    # whether the model writes calls: tools, or an environment whose methods are tools
    calls = bool(agent.tools) or (
        bool(agent.environment or agent.environments) and agent.environment_kind != "step"
    )
    notices = []
    if execute:
        import_errors, reward_issues, calls = _imports(recipe, provenance, calls)
        errors += import_errors
        for issue, is_error in reward_issues:
            (errors if is_error else notices).append(issue)
    else:
        errors += list(_findable(recipe, provenance))
    if environment:
        errors += list(_this_machine(recipe, provenance, calls=calls))
    if agent.max_turn_tokens > recipe.rollout.max_response_tokens:
        notices.append(
            provenance.issue(
                provenance.user_set(("agent", "max_turn_tokens"), ("rollout", "max_response_tokens")),
                f"a turn may sample {agent.max_turn_tokens} tokens but a whole episode holds "
                f"{recipe.rollout.max_response_tokens} (rollout.max_response_tokens): turns are cut there",
                code="agent-turn-longer-than-episode",
                fix="raise rollout.max_response_tokens to what max_turns turns and their results need, "
                "or lower agent.max_turn_tokens",
            )
        )
    return errors, notices


def _settings_while_off(provenance: Provenance) -> Iterator[ConfigIssue]:
    written = sorted(
        (path for path, source in provenance.sources.items() if path[:1] == ("agent",) and len(path) == 2),
        key=str,
    )
    written = [p for p in written if p != ("agent", "enabled") and provenance.of(p).kind != "default"]
    if written:
        yield provenance.issue(
            written[0],
            "agent settings are written but agent.enabled is false: each response is one turn, no tool runs",
            code="agent-disabled",
            found=", ".join(".".join(map(str, p)) for p in written),
            fix="set `agent.enabled: true`, or remove the agent settings",
        )


def _issue(
    provenance: Provenance, path: KeyPath, message: str, code: str, fix: str, **fields: Any
) -> ConfigIssue:
    return provenance.issue(path, message, code=code, fix=fix, **fields)


def _shape(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    agent = recipe.agent
    if not agent.tools and agent.environment is None and not agent.environments:
        yield _issue(
            provenance,
            ("agent", "enabled"),
            "an agent needs something to act on: tools, an environment or environments",
            "agent-empty",
            "name tools (`agent.tools: [rlrun:calculator]`) or an environment class (`agent.environment`)",
        )
    if agent.environment is not None and agent.environments:
        yield _issue(
            provenance,
            provenance.user_set(("agent", "environment"), ("agent", "environments")),
            "agent.environment (one for every row) and agent.environments (one per row, by a data column) "
            "cannot both be set",
            "agent-environment-twice",
            "keep one of them",
        )
    if agent.format == "plain" and agent.chat_template is not None:
        yield _issue(
            provenance,
            ("agent", "chat_template"),
            "a chat template does nothing in the plain format",
            "agent-format-setting",
            "set `agent.format: chat_template`, or remove agent.chat_template",
        )
    if agent.format == "chat_template" and agent.describe_tools:
        yield _issue(
            provenance,
            ("agent", "describe_tools"),
            "in the chat_template format the template describes the tools; describe_tools is for the plain format",
            "agent-format-setting",
            "remove agent.describe_tools",
        )
    if agent.chat_template is not None and not Path(agent.chat_template).is_file():
        yield _issue(
            provenance,
            ("agent", "chat_template"),
            "the chat template file does not exist",
            "agent-chat-template",
            "name a Jinja file (relative paths start at the recipe's folder)",
            found=show_value(agent.chat_template),
        )
    advantage = recipe.algorithm.advantage
    if ADVANTAGES.needs(advantage).needs_contiguous_response:
        yield _issue(
            provenance,
            ("algorithm", "advantage"),
            f"the `{advantage}` estimator compares responses position by position, and an episode's sampled "
            "tokens have holes where results and observations were appended",
            "agent-estimator",
            "use an estimator that scores episodes (`rlrun components` lists them), e.g. "
            "tir_optimal_token_baseline for the optimal token baseline",
        )
    if recipe.rollout.min_response_tokens:
        yield _issue(
            provenance,
            ("rollout", "min_response_tokens"),
            "an episode's turns end where the model ends them: a minimum response length cannot apply",
            "agent-min-tokens",
            "set `rollout.min_response_tokens: 0`",
        )


def _imports(
    recipe: Recipe, provenance: Provenance, calls: bool
) -> tuple[list[ConfigIssue], list[tuple[ConfigIssue, bool]], bool]:
    """The tools and environments imported and described (errors); what their get_reward means
    for the rewards (each issue with whether it is an error); and whether the model writes calls,
    known now that each environment's kind is (`calls` stays the estimate where one failed)."""
    from rlrun.agents.spec import AgentSpecError, load_parts  # imports transformers: agent recipes only

    try:
        tools, environments = load_parts(recipe.agent)
    except AgentSpecError as err:
        issues = [
            _issue(provenance, ("agent", *p.key), p.message, "agent-import", p.fix) for p in err.problems
        ]
        return issues, [], calls
    rewarded = any(e.has_reward for e in environments.values())
    return (
        [],
        list(_environment_reward(recipe, provenance, rewarded)),
        bool(tools) or any(e.kind == "tools" for e in environments.values()),
    )


def _environment_reward(
    recipe: Recipe, provenance: Provenance, rewarded: bool
) -> Iterator[tuple[ConfigIssue, bool]]:
    """An environment's get_reward scores the episodes as TRL's does: say so where the recipe
    does not list it; with no reward functions, an environment without one scores nothing."""
    listed = any(getattr(f, "fn", None) == "rlrun:environment_reward" for f in recipe.reward.functions)
    if rewarded and not listed:
        yield (
            provenance.issue(
                ("agent", "environments" if recipe.agent.environments else "environment"),
                "the environment has get_reward(): rlrun:environment_reward x 1 joins reward.functions, as TRL "
                "adds an environment_factory's reward",
                code="agent-environment-reward",
                fix="list `{fn: rlrun:environment_reward, weight: W}` in reward.functions to choose its weight",
            ),
            False,
        )
    if not rewarded and not recipe.reward.functions:
        yield (
            provenance.issue(
                ("reward", "functions"),
                "nothing scores the episodes: reward.functions is empty and the environment has no get_reward()",
                code="no-reward",
                fix="name a reward function, or give the environment a get_reward() method",
            ),
            True,
        )


def _findable(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    agent = recipe.agent
    named: list[tuple[KeyPath, str]] = [(("agent", "tools", i), spec) for i, spec in enumerate(agent.tools)]
    if agent.environment is not None:
        named.append((("agent", "environment"), agent.environment))
    named += [(("agent", "environments", name), spec) for name, spec in agent.environments.items()]
    for path, spec in named:
        if spec.startswith("rlrun:"):
            continue  # built-ins are checked against their registry by the import check
        module = spec.partition(":")[0]
        if not module_findable(module):
            yield _issue(
                provenance,
                path,
                f"the module {module!r} was not found",
                "agent-import",
                "check the spelling and that the module is importable from the working directory or installed",
                found=show_value(spec),
            )


def _this_machine(recipe: Recipe, provenance: Provenance, *, calls: bool) -> Iterator[ConfigIssue]:
    agent = recipe.agent
    if "rlrun:python" in agent.tools:
        from rlrun.agents.sandbox import sandbox_problem

        if (problem := sandbox_problem()) is not None:
            yield _issue(
                provenance,
                ("agent", "tools", agent.tools.index("rlrun:python")),
                f"rlrun:python cannot run code here: {problem}",
                "agent-sandbox",
                f"run where the sandbox holds (docs/agents.md), or remove rlrun:python; {PORTABLE_HINT}",
            )
    if agent.chat_template is not None and not Path(agent.chat_template).is_file():
        return  # reported by _shape
    tokenizer = _local_tokenizer(recipe)
    if tokenizer is None:
        return  # not on this machine yet: the runner's format checks it when it loads
    from rlrun.agents.formats import plain_format_problem, tool_template_problem

    if agent.format == "chat_template":
        template = Path(agent.chat_template).read_text(encoding="utf-8") if agent.chat_template else None
        if (problem := tool_template_problem(tokenizer, template)) is not None:
            yield _issue(
                provenance,
                ("agent", "chat_template") if agent.chat_template else ("agent", "format"),
                problem,
                "agent-chat-template",
                "name a Jinja chat template with tool support in `agent.chat_template` (docs/agents.md), or use "
                f"`agent.format: plain`; {PORTABLE_HINT}",
            )
    elif calls and (problem := plain_format_problem(tokenizer)) is not None:
        yield _issue(
            provenance,
            provenance.user_set(("agent", "format"), ("model", "path")),
            f"{problem}: this model could never call a tool",
            "agent-plain-format",
            "use a model whose tokenizer writes `<`, `>` and quotes, or `agent.format: chat_template` with "
            f"a template of its own tokens; {PORTABLE_HINT}",
        )


def _local_tokenizer(recipe: Recipe) -> Any:
    """The recipe's tokenizer when it is on this machine, loaded without the model (a hub id not
    downloaded yet: None)."""
    from transformers import AutoTokenizer

    from rlrun.embedded import model_folder_here

    name = recipe.model.tokenizer or recipe.model.path
    try:
        return AutoTokenizer.from_pretrained(
            model_folder_here(name) or name,
            local_files_only=True,
            trust_remote_code=recipe.model.trust_remote_code,
        )
    except Exception:  # noqa: BLE001 (not on this machine yet, or not a tokenizer: loading says which)
        return None


@dataclass(frozen=True)
class EpisodePlan:
    """What one step's episodes are: `episodes` (prompts x rollout.n), each up to `max_turns`
    model turns of up to `max_turn_tokens` sampled tokens, all within `max_episode_tokens` after
    the prompt (turns and results together); only the sampled tokens are trained."""

    episodes: int
    max_turns: int
    max_turn_tokens: int
    max_episode_tokens: int
    max_sampled_tokens: int
    format: str
    tools: list[str]
    environments: list[str]
    trained: str = "the tokens the model sampled; tool results and observations are context"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def episode_plan(recipe: Recipe) -> EpisodePlan | None:
    agent = recipe.agent
    if not agent.enabled:
        return None
    budget = recipe.rollout.max_response_tokens
    environments = ([agent.environment] if agent.environment else []) + [
        f"{name}: {spec}" for name, spec in agent.environments.items()
    ]
    return EpisodePlan(
        episodes=recipe.trainer.prompts_per_step * recipe.rollout.n,
        max_turns=agent.max_turns,
        max_turn_tokens=min(agent.max_turn_tokens, budget),
        max_episode_tokens=budget,
        max_sampled_tokens=min(budget, agent.max_turns * agent.max_turn_tokens),
        format=agent.format,
        tools=list(agent.tools),
        environments=environments,
    )
