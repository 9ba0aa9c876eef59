"""rlrun against TRL's GRPOTrainer: the same GRPO workload through both, in one invocation.

    python benchmarks/vs_trl.py                 # full run (see benchmarks/README.md for set-up)
    python benchmarks/vs_trl.py --quick         # smoke run: a few steps, 100 validation prompts

Every (workload, beta) pair runs both sides, each in its own subprocess (so peak RSS is that
side's alone), alternating which side goes first (ABBA) so that slow drift of a shared machine
cancels. Both sides get the same model weights, task splits, seed, sampling and optimiser
settings, and are scored by the same greedy evaluation on held-out prompts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from itertools import accumulate, pairwise
from operator import attrgetter
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

PROMPTS_PER_STEP = 16
SAMPLES_PER_PROMPT = 8
KL_ON_BETA = 0.04
RLRUN_EVAL_PROMPTS = 8
PER_STEP_SHOWN = 10  # steps whose length, reward and time are printed per run
SHOWN = 4  # sampled completions of the first step printed per side


@dataclass(frozen=True)
class Spec:
    """One side's run: everything both frameworks are given."""

    side: str  # "trl" | "rlrun"
    workload: str
    model_dir: str
    beta: float
    steps: int
    max_new_tokens: int
    fixed_length: bool  # EOS suppressed until max_new_tokens (min_new_tokens = max_new_tokens)
    lr: float
    seed: int
    val_prompts: int
    work_dir: str
    prompts_per_step: int = PROMPTS_PER_STEP
    samples_per_prompt: int = SAMPLES_PER_PROMPT
    chat: bool = False  # the real model: chat-template prompts asking for the number, math_answer reward
    micro_batch_samples: int | None = None  # rows per forward/backward, both sides; None: the step's rows
    layout: str = "auto"  # rlrun's forward layout: its cost model's choice, or forced "packed" / "padded"
    recipe: str = "grpo"  # the built-in recipe rlrun's side starts from (the overrides set the rest)
    lr_scheduler: tuple[str, int, float] = ("constant", 0, 0.0)  # rlrun's (name, warm-up steps, min lr ratio)
    eval_every: int = 0  # steps between held-out greedy evaluations (not timed); 0: at the end

    @property
    def rows(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    @property
    def micro_rows(self) -> int:
        return self.micro_batch_samples or self.rows

    @property
    def eval_tokens(self) -> int:
        """Greedy evaluation's answer length: the arithmetic answer (8), or the real model's budget."""
        return self.max_new_tokens if self.chat else 8


@dataclass
class Result:
    spec: Spec
    step_times_s: list[float]
    completion_tokens: list[int]  # per step
    mean_reward: list[float]  # per step
    samples: list[str]  # the first step's first prompt, then a few of its completions with their token counts
    peak_rss_mib: float
    acc_after: float
    # mean seconds a timed step per phase (rlrun's timing_s/*; TRL's timed alike in run_trl)
    phase_s: dict[str, float] = field(default_factory=dict)
    packed_forwards: int = 0  # rlrun: forwards that ran packed...
    layout_forwards: int = 0  # ...of all its forwards
    curve: list[list[float]] = field(default_factory=list)  # [step, training seconds, held-out accuracy]

    @property
    def median_step_s(self) -> float:
        return statistics.median(self.step_times_s[self.timed()])

    @property
    def tokens_per_s(self) -> float:
        timed = self.timed()
        return sum(self.completion_tokens[timed]) / sum(self.step_times_s[timed])

    @property
    def mean_response_tokens(self) -> float:
        """Completion tokens per sampled response over the timed steps."""
        return statistics.mean(self.completion_tokens[self.timed()]) / self.spec.rows

    def timed(self) -> slice:
        return timed_steps(len(self.step_times_s))


def mean_phases(steps: list[dict[str, float]]) -> dict[str, float]:
    """Each phase's mean seconds a step over `steps` (0 in a step it did not run in)."""
    return {k: statistics.mean(m.get(k, 0.0) for m in steps) for k in sorted({k for m in steps for k in m})}


def load_results(path: Path) -> list[Result]:
    """The results a benchmark wrote with `--json` ({"results": [asdict(Result), ...], ...})."""
    return [Result(spec=Spec(**r.pop("spec")), **r) for r in json.loads(path.read_text())["results"]]


def timed_steps(steps: int) -> slice:
    """All steps but the first (warm-up: allocator, lazy init) and the last (rlrun's closing
    evaluation falls in it), when there are enough."""
    return slice(1, -1) if steps > 2 else slice(None)


def rlrun_timed_phases(steps: list[dict]) -> dict[str, float]:
    """Each phase's mean seconds over an rlrun run's timed steps (its `timing_s/*` metrics)."""
    timed = steps[timed_steps(len(steps))]
    return mean_phases(
        [{k.removeprefix("timing_s/"): v for k, v in m.items() if k.startswith("timing_s/")} for m in timed]
    )


# --- shared by both sides -------------------------------------------------------------------


def arithmetic_splits(n_val: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The default recipe's arithmetic task: train and validation records ({prompt, answer})."""
    from rlrun.tasks.arithmetic import ArithmeticTask

    task = ArithmeticTask(digits=2, operators=("+",), seed=1234)
    keep = ("prompt", "answer")
    return (
        [{k: r[k] for k in keep} for r in task.train(20_000)],
        [{k: r[k] for k in keep} for r in task.validation(n_val)],
    )


def exact_match_reward() -> Callable[[list[str], list[str], list[str]], list[float]]:
    from rlrun.rewards import REWARDS

    return REWARDS.get("rlrun:exact_match")


# The real model answers in words unless asked: the real recipes' wording (recipes/real/), and a
# reward that reads the last number (`23 + 58 = 81`).
CHAT_TEMPLATE = "What is {prompt}? Answer with only the number."


def task_reward(chat: bool) -> Callable[[list[str], list[str], list[str]], list[float]]:
    from rlrun.rewards import REWARDS

    return REWARDS.get("rlrun:math_answer" if chat else "rlrun:exact_match")


def chat_messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": CHAT_TEMPLATE.format(prompt=prompt)}]


def load_tokenizer(model_dir: str) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(model_dir, padding_side="left")


@torch.no_grad()
def greedy_accuracy(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    val: list[dict[str, str]],
    *,
    chat: bool = False,
    max_new_tokens: int = 8,
) -> float:
    """Accuracy of greedy answers (at most `max_new_tokens`, stopping at EOS), one batch: exact
    match, or with `chat` the real model's prompt form and `rlrun:math_answer`."""
    was_training = model.training
    model.eval()
    prompts = [r["prompt"] for r in val]
    if chat:
        prompts = [
            tokenizer.apply_chat_template(chat_messages(p), tokenize=False, add_generation_prompt=True)
            for p in prompts
        ]
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=not chat).to(
        model.device
    )
    out = model.generate(
        **batch,
        do_sample=False,
        max_new_tokens=max_new_tokens,
        min_new_tokens=0,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    completions = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    model.train(was_training)
    scores = task_reward(chat)(prompts, completions, [r["answer"] for r in val])
    return sum(scores) / len(scores)


def sample_line(tokenizer: PreTrainedTokenizerBase, text: str) -> str:
    """A sampled completion for the log, with its length in tokens (EOS not counted): the same
    count on both sides, from the decoded text (rlrun's samples.jsonl keeps only the text)."""
    return f"{len(tokenizer(text, add_special_tokens=False)['input_ids'])} text tokens: {text!r}"


def peak_rss_mib() -> float:
    """This process's peak resident set. Linux: VmHWM, which starts afresh at exec, whereas
    ru_maxrss keeps the high-water mark of the parent the worker was forked from."""
    status = Path("/proc/self/status")
    if status.exists():
        line = next(x for x in status.read_text().splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # macOS reports bytes


# --- TRL -----------------------------------------------------------------------------------


def run_trl(spec: Spec) -> Result:
    train, val = arithmetic_splits(spec.val_prompts)
    if spec.chat:  # conversational prompts: TRL applies the chat template itself
        train = [{**r, "prompt": chat_messages(r["prompt"])} for r in train]
    tokens_per_step: list[int] = []
    reward_per_step: list[float] = []
    samples: list[str] = []
    score = task_reward(spec.chat)

    def reward(
        prompts: list,
        completions: list,
        completion_ids: list[list[int]],
        answer: list[str],
        **_: object,
    ) -> list[float]:
        tokens_per_step.append(sum(map(len, completion_ids)))
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        scores = score([str(p) for p in prompts], texts, answer)
        reward_per_step.append(sum(scores) / len(scores))
        if not samples:
            samples.append(f"prompt {trl_prompt_text(tokenizer, prompts[0])!r}, answer {answer[0]!r}")
            samples.extend(sample_line(tokenizer, t) for t in texts[:SHOWN])
        return scores

    tokenizer = load_tokenizer(spec.model_dir)
    trainer, clock = trl_trainer(spec, trl_config(spec), train, reward, tokenizer, val)
    trainer.train()
    acc_after = greedy_accuracy(
        trainer.model, tokenizer, val, chat=spec.chat, max_new_tokens=spec.eval_tokens
    )
    step_times = [b - a for a, b in pairwise(clock.marks)]
    return Result(
        spec,
        step_times,
        tokens_per_step,
        reward_per_step,
        samples,
        peak_rss_mib(),
        acc_after,
        phase_s=mean_phases(clock.phases[timed_steps(len(clock.phases))]),
        curve=clock.curve,
    )


def trl_prompt_text(tokenizer: PreTrainedTokenizerBase, prompt: str | list, **template: object) -> str:
    """A prompt as TRL renders it for generation (a conversation through the chat template)."""
    if isinstance(prompt, str):
        return prompt
    return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True, **template)


def trl_config(spec: Spec, **extra: object):  # -> trl.GRPOConfig (trl is imported only in the worker)
    """TRL's settings for `spec`: every knob rlrun also has set to the shared value; `extra`:
    further GRPOConfig fields."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(Path(spec.work_dir) / "trl"),
        max_steps=spec.steps,
        # One optimizer step per rollout, in micro-batches (TRL generates once per steps_per_generation,
        # which defaults to gradient_accumulation_steps).
        per_device_train_batch_size=spec.micro_rows,
        gradient_accumulation_steps=spec.rows // spec.micro_rows,
        num_generations=spec.samples_per_prompt,
        max_completion_length=spec.max_new_tokens,
        generation_kwargs={"min_new_tokens": spec.max_new_tokens} if spec.fixed_length else None,
        temperature=1.0,
        beta=spec.beta,  # k3 estimator when > 0
        loss_type="dapo",  # token-mean over the whole batch, like rlrun's token-mean
        epsilon=0.2,
        learning_rate=spec.lr,  # on rlrun's schedule (trl_trainer's create_scheduler)
        adam_beta1=0.9,
        adam_beta2=0.99,
        adam_epsilon=1e-8,
        weight_decay=0.0,
        max_grad_norm=1.0,
        gradient_checkpointing=False,  # TRL defaults both on; rlrun runs without them
        bf16=False,
        model_init_kwargs={"dtype": torch.float32},
        seed=spec.seed,
        shuffle_dataset=False,  # both sides take the training prompts in order: the same prompts each step
        use_cpu=not torch.cuda.is_available(),
        save_strategy="no",
        report_to="none",
        logging_steps=spec.steps,
        disable_tqdm=True,
        **extra,
    )


def trl_trainer(
    spec: Spec,
    config: object,
    train: list[dict],
    reward: Callable[..., list[float]],
    tokenizer: PreTrainedTokenizerBase,
    val: list[dict[str, str]],
    **trainer_kwargs: object,
):  # -> tuple[trl.GRPOTrainer, StepClock]
    """TRL's GRPOTrainer on `train` (in order) with rlrun's learning-rate schedule, timed: the
    returned clock's step-end marks, each step's phases and (with spec.eval_every) held-out
    greedy accuracy on `val`. `trainer_kwargs` go to GRPOTrainer (tools=, processing_class=)."""
    from datasets import Dataset
    from torch.optim.lr_scheduler import LambdaLR
    from transformers import TrainerCallback, TrainerState
    from trl import GRPOTrainer

    from rlrun.training.optim import lr_factor

    # Seconds of the current step in TRL's phases, named as rlrun's timing_s/* (Trainer below).
    phase_now: dict[str, float] = defaultdict(float)

    @contextmanager
    def phase(name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            phase_now[name] += time.perf_counter() - start

    class StepClock(TrainerCallback):
        """Step-end marks on a clock that stops while the held-out evaluations run, and each
        step's phases: gen, ref, old_log_prob, reward and the rest of preparing the batch
        (`other`), and update_actor (the rest of the step: forward, backward, optimizer)."""

        def __init__(self) -> None:
            self.marks: list[float] = []
            self.curve: list[list[float]] = []
            self.paused = 0.0
            self.phases: list[dict[str, float]] = []

        def on_train_begin(self, *_: object, **__: object) -> None:
            self.marks.append(time.perf_counter())

        def on_step_end(self, _args: object, state: TrainerState, *__: object, **kwargs: object) -> None:
            self.marks.append(time.perf_counter() - self.paused)
            prepare = phase_now.pop("prepare", 0.0)
            inside = {k: phase_now.get(k, 0.0) for k in ("gen", "ref", "old_log_prob")}
            step = self.marks[-1] - self.marks[-2]
            self.phases.append(
                inside | {"other": prepare - sum(inside.values()), "update_actor": step - prepare}
            )
            phase_now.clear()
            if spec.eval_every and state.global_step % spec.eval_every == 0:
                start = time.perf_counter()
                acc = greedy_accuracy(
                    kwargs["model"], tokenizer, val, chat=spec.chat, max_new_tokens=spec.eval_tokens
                )
                self.paused += time.perf_counter() - start
                self.curve.append([state.global_step, self.marks[-1] - self.marks[0], acc])

    class Trainer(GRPOTrainer):
        def create_scheduler(self, num_training_steps: int, optimizer: object = None) -> LambdaLR:
            """rlrun's schedule, step for step (transformers' warm-up starts from a rate of 0)."""
            if self.lr_scheduler is None:
                name, warmup, min_ratio = spec.lr_scheduler
                factor = partial(
                    lr_factor, name=name, warmup_steps=warmup, total_steps=spec.steps, min_lr_ratio=min_ratio
                )
                self.lr_scheduler = LambdaLR(optimizer or self.optimizer, factor)
            return self.lr_scheduler

        def _prepare_inputs(self, generation_batch: dict) -> dict:
            with phase("prepare"):  # generation, scoring and the no-grad passes, once a step
                return super()._prepare_inputs(generation_batch)

        def _generate(self, prompts: list) -> tuple:
            with phase("gen"):
                return super()._generate(prompts)

        def _get_per_token_logps_and_entropies(self, model: torch.nn.Module, *args: object, **kwargs: object):
            if torch.is_grad_enabled():  # the loss's forward: part of update_actor
                return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
            with phase("ref" if model is self.ref_model else "old_log_prob"):
                return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)

    clock = StepClock()
    trainer = Trainer(
        model=spec.model_dir,
        reward_funcs=reward,
        args=config,
        train_dataset=Dataset.from_list(train),
        callbacks=[clock],
        **trainer_kwargs,
    )
    return trainer, clock


# --- rlrun ---------------------------------------------------------------------------------


def rlrun_overrides(spec: Spec) -> list[str]:
    """The built-in GRPO recipe, with every knob that TRL also has set to the shared value."""
    chat = [
        "data.apply_chat_template=true",
        f"data.prompt_template={json.dumps(CHAT_TEMPLATE)}",
        "reward.functions=[{fn: rlrun:math_answer}]",
    ]
    return [
        f"model.path={spec.model_dir}",
        *(chat if spec.chat else ["data.apply_chat_template=false"]),  # TRL tokenises plain text as is
        "data.shuffle=false",  # TRL: shuffle_dataset=False
        f"trainer.total_steps={spec.steps}",
        f"trainer.seed={spec.seed}",
        f"trainer.prompts_per_step={spec.prompts_per_step}",
        f"rollout.n={spec.samples_per_prompt}",
        f"rollout.max_response_tokens={spec.max_new_tokens}",
        f"rollout.min_response_tokens={spec.max_new_tokens if spec.fixed_length else 0}",  # TRL: min_new_tokens
        "rollout.temperature=1.0",
        "rollout.top_p=1.0",
        "rollout.top_k=0",
        "algorithm.advantage=grpo",
        "algorithm.norm_adv_by_std_in_grpo=true",
        "actor.policy_loss=vanilla",
        "actor.clip_ratio=0.2",
        "actor.loss_agg_mode=token-mean",
        "actor.entropy_coef=0.0",
        f"actor.optimizer.lr={spec.lr}",
        "actor.optimizer.betas=[0.9, 0.99]",
        "actor.optimizer.eps=1.0e-8",
        "actor.optimizer.weight_decay=0.0",
        f"actor.lr_scheduler.name={spec.lr_scheduler[0]}",
        f"actor.lr_scheduler.warmup_steps={spec.lr_scheduler[1]}",
        f"actor.lr_scheduler.min_lr_ratio={spec.lr_scheduler[2]}",
        "actor.grad_clip=1.0",
        "actor.ppo_epochs=1",
        f"actor.mini_batch_samples={spec.rows}",
        f"actor.micro_batch_samples={spec.micro_rows}",
        f"actor.padding_free={str(spec.layout != 'padded').lower()}",
        f"actor.kl_loss.enabled={str(spec.beta > 0).lower()}",
        f"actor.kl_loss.coef={spec.beta}",
        "actor.kl_loss.estimator=low_var_kl",  # k3, as TRL
        # rlrun's own evaluations (the start, the end, every eval_every steps) are not timed;
        # without eval_every, a token few, so that both sides' memory carries only the shared one.
        f"trainer.eval.every_steps={spec.eval_every}",
        f"trainer.eval.prompts={spec.val_prompts if spec.eval_every else min(spec.val_prompts, RLRUN_EVAL_PROMPTS)}",
        "trainer.checkpoint.every_steps=0",  # only the final one, after the last timed step
        "logging.wandb.enabled=false",
        "logging.samples_every_steps=1",
    ]


def probe_layouts(layout: str) -> list[bool]:
    """Record the layout each forward takes (True: packed) in the returned list; with `layout`
    "packed", pack every forward (the cost model's own choice is what an "auto" run records).
    "padded" needs no probe: `actor.padding_free=false`."""
    from rlrun.training import sequences

    plan = sequences._layout_plan
    taken: list[bool] = []

    def probe(*args: object, **kwargs: object) -> sequences.LayoutPlan:
        chosen = plan(*args, **kwargs)
        taken.append(chosen.layout is not None)
        return chosen

    sequences._layout_plan = probe
    if layout == "packed":  # packed costs nothing: always the cheaper
        sequences._packed_cost = lambda *_: 0.0
    return taken


def rlrun_steps(metrics_file: Path) -> tuple[list[dict], list[dict], list[float]]:
    """A run's metrics.jsonl: every row, the steps' rows (step > 0), and each step's training
    seconds (wall time since the previous row, less the evaluation logged in the step's row)."""
    records = [json.loads(line) for line in metrics_file.read_text().splitlines()]
    steps = [m for m in records if m["step"] > 0]
    walls = [records[0]["wall_time_s"]] + [m["wall_time_s"] for m in steps]
    step_times = [b - a - m.get("timing_s/eval", 0.0) for (a, b), m in zip(pairwise(walls), steps)]
    return records, steps, step_times


def run_rlrun(spec: Spec) -> Result:
    from rlrun.recipes import load_recipe
    from rlrun.recipes.builtin import builtin_path
    from rlrun.training.run import RunOptions, train

    _, val = arithmetic_splits(spec.val_prompts)
    overrides = rlrun_overrides(spec)
    loaded = load_recipe(builtin_path(spec.recipe), overrides)
    taken = probe_layouts(spec.layout)
    run = train(loaded, RunOptions(run_dir=Path(spec.work_dir) / "run"), say=print, overrides=overrides)
    records, steps, step_times = rlrun_steps(run.dir.metrics_file)
    curve = [[0, 0.0, records[0]["val/accuracy"]]] + [
        [m["step"], t, m["val/accuracy"]]
        for m, t in zip(steps, accumulate(step_times))
        if "val/accuracy" in m
    ]
    tokens = [round(m["response_length/mean"] * spec.rows) for m in steps]
    tokenizer = load_tokenizer(spec.model_dir)
    first = [json.loads(line) for line in run.dir.samples_file.read_text().splitlines()][:SHOWN]
    samples = [f"prompt {first[0]['prompt']!r}, answer {first[0]['ground_truth']!r}"]
    samples += [sample_line(tokenizer, s["completion"]) for s in first]
    acc_after = greedy_accuracy(
        run.session.models.unwrapped_policy,
        tokenizer,
        val,
        chat=spec.chat,
        max_new_tokens=spec.eval_tokens,
    )
    rewards = [m["critic/score/mean"] for m in steps]
    phases = rlrun_timed_phases(steps)
    return Result(
        spec,
        step_times,
        tokens,
        rewards,
        samples,
        peak_rss_mib(),
        acc_after,
        phase_s=phases,
        packed_forwards=sum(taken),
        layout_forwards=len(taken),
        curve=curve,
    )


# --- orchestration --------------------------------------------------------------------------


def build_scaled_model(tiny_dir: str, out_dir: Path, seed: int) -> int:
    """The ~30M-parameter workload: the tiny model's config scaled up, random init (seeded).

    Random weights are enough here: this workload measures kernel efficiency with responses
    held at full length, not learning (its accuracy stays near 0 on both sides)."""
    tiny = AutoConfig.from_pretrained(tiny_dir)
    heads = 8
    kv_ratio = tiny.num_attention_heads // tiny.num_key_value_heads
    scaled = {
        "hidden_size": 512,
        "intermediate_size": 2048,
        "num_hidden_layers": 8,
        "num_attention_heads": heads,
        "num_key_value_heads": heads // kv_ratio,
        "head_dim": 512 // heads,
    }
    # Per-layer lists (layer_types) are derived again for the new depth.
    config = type(tiny).from_dict({k: v for k, v in tiny.to_dict().items() if k != "layer_types"} | scaled)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = AutoModelForCausalLM.from_pretrained(tiny_dir).generation_config
    model.save_pretrained(out_dir)
    load_tokenizer(tiny_dir).save_pretrained(out_dir)
    return sum(p.numel() for p in model.parameters())


def run_side(spec: Spec) -> Result:
    """Run one side in a fresh interpreter; its noise goes to stderr, its Result comes back as JSON."""
    data = run_worker(spec, __file__)
    return Result(spec=Spec(**data.pop("spec")), **data)


def run_worker(spec: Spec, script: str) -> dict:
    """`script --worker SPEC_JSON` in a fresh interpreter (its noise goes to stderr): the
    result.json it writes beside the spec, as a dict."""
    work = Path(spec.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    (work / "spec.json").write_text(json.dumps(asdict(spec)))
    # Both sides inherit this environment as is, OpenMP's wait policy included (benchmarks/README.md).
    subprocess.run(
        [sys.executable, script, "--worker", str(work / "spec.json")], check=True, stdout=sys.stderr
    )
    return json.loads((work / "result.json").read_text())


def worker(spec_path: Path) -> None:
    spec = Spec(**json.loads(spec_path.read_text()))
    result = {"trl": run_trl, "rlrun": run_rlrun}[spec.side](spec)
    (spec_path.parent / "result.json").write_text(json.dumps(asdict(result)))


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def spread(values: list[float], fmt: str) -> str:
    """`lo–hi` over the repeats (one value when they agree or there is one run)."""
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo}–{hi}"


def parse_or_work(parser: argparse.ArgumentParser, work: Callable[[Path], None]) -> argparse.Namespace | None:
    """The command line's arguments; or, in a subprocess started with `--worker SPEC` (one side's
    run, as `run_worker` starts it), None once `work(SPEC)` is done."""
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        work(args.worker)
        return None
    return args


def spread_cells(runs: list, columns: list[tuple[str, str]]) -> list[str]:
    """A table cell per (attribute, format): the `spread` of that attribute over the runs
    (a dotted name reaches into an attribute's own)."""
    return [spread([attrgetter(name)(r) for r in runs], fmt) for name, fmt in columns]


def report(results: list[Result], acc_before: dict[str, float]) -> str:
    """The Markdown table: each side, then the rlrun / TRL ratios, per (workload, KL); with
    repeats, each cell is the range over them (ratios: over the repeats' pairs, in run order)."""
    lines = [
        row(
            [
                "workload",
                "KL",
                "side",
                "runs",
                "median step (s)",
                "completion tok/s",
                "mean response tokens",
                "peak RSS (MiB)",
                "val acc before",
                "val acc after",
            ]
        ),
        row(["---"] * 3 + ["---:"] * 7),
    ]
    groups: dict[tuple[str, float], dict[str, list[Result]]] = {}
    for r in results:
        groups.setdefault((r.spec.workload, r.spec.beta), {}).setdefault(r.spec.side, []).append(r)
    for (workload, beta), sides in groups.items():
        kl = f"beta {beta:g}" if beta else "off"
        for side in ("trl", "rlrun"):
            if runs := sides.get(side):
                timing = [
                    ("median_step_s", ".3f"),
                    ("tokens_per_s", ",.0f"),
                    ("mean_response_tokens", ".1f"),
                    ("peak_rss_mib", ",.0f"),
                ]
                lines.append(
                    row(
                        [workload, kl, side, str(len(runs)), *spread_cells(runs, timing)]
                        + [f"{acc_before[workload]:.1%}", spread([r.acc_after for r in runs], ".1%")]
                    )
                )
        pairs = list(zip(sides.get("trl", []), sides.get("rlrun", [])))
        if pairs:
            lines.append(
                row(
                    [
                        workload,
                        kl,
                        "**rlrun / TRL**",
                        str(len(pairs)),
                        spread([o.median_step_s / t.median_step_s for t, o in pairs], ".2f") + "x",
                        "**" + spread([o.tokens_per_s / t.tokens_per_s for t, o in pairs], ".2f") + "x**",
                        spread([o.mean_response_tokens / t.mean_response_tokens for t, o in pairs], ".2f")
                        + "x",
                        spread([o.peak_rss_mib / t.peak_rss_mib for t, o in pairs], ".2f") + "x",
                        "",
                        spread([(o.acc_after - t.acc_after) * 100 for t, o in pairs], "+.1f") + " pts",
                    ]
                )
            )
    return "\n".join(lines)


def environment() -> str:
    import platform

    import transformers
    import trl

    import rlrun

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], capture_output=True, text=True, check=False, cwd=Path(__file__).parent
        ).stdout.strip()

    sha = git("rev-parse", "--short", "HEAD") + (
        " + uncommitted changes" if git("status", "--porcelain", "--", ":/rlrun") else ""
    )
    return (
        f"rlrun {rlrun.__version__} ({sha}), trl {trl.__version__}, transformers {transformers.__version__}, "
        f"torch {torch.__version__}, python {platform.python_version()}, {torch.get_num_threads()} threads, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(default)')}, {platform.processor() or platform.machine()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="GRPO steps on the tiny workload")
    parser.add_argument("--steps-30m", type=int, default=5, help="GRPO steps on the ~30M workload")
    parser.add_argument("--steps-real", type=int, default=5, help="GRPO steps on the real model")
    parser.add_argument(
        "--workloads",
        default="tiny,30m",
        help="comma-separated subset of tiny,30m,smollm2 (smollm2: SmolLM2-135M-Instruct, rlrun[real])",
    )
    parser.add_argument(
        "--kl", default="off,on", help="comma-separated subset of off,on (on = beta 0.04, k3)"
    )
    parser.add_argument("--sides", default="trl,rlrun", help="comma-separated subset of trl,rlrun")
    parser.add_argument("--lr", type=float, help="both sides' learning rate (default: the grpo recipe's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="run every setting this many times (every other repeat in reverse order: ABBA per setting); "
        "the table gives ranges",
    )
    parser.add_argument("--val-prompts", type=int, default=500)
    parser.add_argument("--model", default="rlrun:tiny-base", help="the tiny workload's model")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 / 2 steps, 100 validation prompts")
    args = parse_or_work(parser, worker)
    if args is None:
        return
    if args.quick:
        args.steps, args.steps_30m, args.val_prompts = 5, 2, 100

    from rlrun.embedded import resolve_model_path
    from rlrun.recipes import load_recipe
    from rlrun.recipes.builtin import builtin_path

    lr = args.lr or load_recipe(builtin_path("grpo"), []).recipe.actor.optimizer.lr
    print(f"$ python benchmarks/vs_trl.py {' '.join(sys.argv[1:])}\n{environment()}", flush=True)
    _, val = arithmetic_splits(args.val_prompts)
    betas = {"off": 0.0, "on": KL_ON_BETA}
    results: list[Result] = []
    acc_before: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="vs_trl_") as tmp:
        tiny_dir = str(resolve_model_path(args.model))
        # Each workload's Spec, its side, KL and folder filled in per run.
        shared = {"side": "", "beta": 0.0, "seed": args.seed, "val_prompts": args.val_prompts, "work_dir": ""}
        workloads = {"tiny": Spec(workload="tiny", model_dir=tiny_dir, steps=args.steps, max_new_tokens=8,
                                  fixed_length=False, lr=lr, **shared)}  # fmt: skip
        if "30m" in args.workloads:
            big_dir = Path(tmp) / "model-30m"
            params = build_scaled_model(tiny_dir, big_dir, args.seed)
            print(f"30m workload: {params / 1e6:.1f}M parameters, random init (seed {args.seed})", flush=True)
            workloads["30m"] = Spec(workload="30m", model_dir=str(big_dir), steps=args.steps_30m, max_new_tokens=64,
                                    fixed_length=True, lr=lr, **shared)  # fmt: skip
        if "smollm2" in args.workloads:
            # The real recipe's shape (recipes/real/grpo_smollm2.yaml): 8 prompts x 4 samples,
            # lr 5e-5; responses end at EOS (natural lengths), up to 64 tokens.
            real = load_recipe(builtin_path("real/grpo_smollm2"), []).recipe
            workloads["smollm2"] = Spec(workload="smollm2", model_dir=str(resolve_model_path(real.model.path)),
                                        steps=args.steps_real, max_new_tokens=64, fixed_length=False,
                                        lr=args.lr or real.actor.optimizer.lr, prompts_per_step=8,
                                        samples_per_prompt=4, chat=True, **shared)  # fmt: skip
        for name in args.workloads.split(","):
            # The same weights and greedy code on both sides: one "before" figure per workload.
            w = workloads[name]
            print(f"{name}: lr {w.lr:g} (constant), {w.steps} steps", flush=True)
            acc_before[name] = greedy_accuracy(
                AutoModelForCausalLM.from_pretrained(w.model_dir),
                load_tokenizer(w.model_dir),
                val,
                chat=w.chat,
                max_new_tokens=w.eval_tokens,
            )
        settings = [(w, k) for w in args.workloads.split(",") for k in args.kl.split(",")]
        # Every other repeat runs the settings backwards, so each setting gets both side orders.
        runs = [x for rep in range(args.repeats) for x in (settings if rep % 2 == 0 else settings[::-1])]
        for i, (name, kl) in enumerate(runs):
            order = ("trl", "rlrun") if i % 2 == 0 else ("rlrun", "trl")  # ABBA against drift
            for side in (s for s in order if s in args.sides.split(",")):
                spec = replace(
                    workloads[name],
                    side=side,
                    beta=betas[kl],
                    work_dir=str(Path(tmp) / f"{i}-{name}-{kl}-{side}"),
                )
                started, load_before = time.perf_counter(), os.getloadavg()[0]
                r = run_side(spec)
                results.append(r)
                print(
                    f"{name:>5} KL {kl:<3} {side:<5}: {spec.steps} steps, median {r.median_step_s:.3f} s/step, "
                    f"{r.tokens_per_s:,.0f} tok/s, peak RSS {r.peak_rss_mib:,.0f} MiB, "
                    f"acc {acc_before[name]:.1%} -> {r.acc_after:.1%}  "
                    f"({time.perf_counter() - started:.0f} s wall, "
                    f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f})",
                    flush=True,
                )
                rows = spec.rows
                first = f" (the first {PER_STEP_SHOWN})" if spec.steps > PER_STEP_SHOWN else ""
                print(
                    f"    per step{first}: mean response tokens "
                    + " ".join(f"{t / rows:.1f}" for t in r.completion_tokens[:PER_STEP_SHOWN])
                    + ", mean reward "
                    + " ".join(f"{x:.2f}" for x in r.mean_reward[:PER_STEP_SHOWN])
                    + ", step times (s) "
                    + " ".join(f"{x:.1f}" for x in r.step_times_s[:PER_STEP_SHOWN]),
                    *(f"    step 1: {x}" for x in r.samples),
                    sep="\n",
                    flush=True,
                )
    print("\n" + report(results, acc_before), flush=True)


if __name__ == "__main__":
    main()
