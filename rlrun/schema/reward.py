"""`reward`: the weighted reward functions (rules, imported functions and learned reward models)
and DAPO's overlong shaping."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from rlrun.schema.base import NonNegativeFloat, PositiveFloat, PositiveInt, Section

# How a reward function is called (rlrun.rewards.styles): rlrun's batch contract, verl's
# per-sample compute_score, TRL's keyword batch; auto reads it from the signature.
RewardStyle = Literal["auto", "rlrun", "verl", "trl"]


class RewardFunction(Section):
    fn: str = Field(min_length=1)
    """A reward: built-in name or "pkg.module:function" (an importable callable)."""
    weight: float = 1.0
    """Weight of this function in the summed reward."""
    style: RewardStyle = "auto"
    """How the function is called: rlrun | verl (compute_score) | trl | auto (from its signature)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Extra keyword arguments passed to the function on every call."""

    @property
    def shown(self) -> str:
        """How summaries name this reward."""
        return self.fn


class RewardModel(Section):
    """A Hugging Face sequence-classification model (`AutoModelForSequenceClassification`) as a
    reward: its output on the prompt + response, tokenised by its own tokenizer (through its
    own chat template when it has one), scored `batch_size` at a time on its own device."""

    model: str = Field(min_length=1)
    """rlrun:<name> (rlrun:tiny-reward), a local Hugging Face folder or a hub id."""
    weight: float = 1.0
    """Weight of this model's score in the summed reward."""
    name: str | None = Field(None, min_length=1)
    """Metric name; null = the model's last path part."""
    label: int | str | None = None
    """The output to use, by index or id2label name; null = the only one."""
    score: Literal["logit", "probability"] = "logit"
    """logit | probability (sigmoid for one output, else softmax)."""
    shift: float = 0.0
    """Reported score = (score - shift) / scale: a fixed normalisation, e.g. by the model's mean."""
    scale: PositiveFloat = 1.0
    """...and standard deviation on your data (`rlrun eval` measures them)."""
    batch_size: PositiveInt = 32
    """Sequences per forward pass."""
    max_tokens: PositiveInt | None = None
    """Longer inputs keep their last tokens; null = no limit."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """auto = the GPU when there is one."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """The reward model's weights' dtype."""
    trust_remote_code: bool = False
    """Allow the model folder's own Python code (only for models you trust)."""

    @property
    def shown(self) -> str:
        return f"{self.model} (reward model)"


def _entry_kind(value: Any) -> str:
    """The union member an entry is: a `model:` key makes it a reward model. The tags are the
    class names, so an error's location says which keys the entry may have."""
    is_model = isinstance(value, RewardModel) or (isinstance(value, dict) and "model" in value)
    return "RewardModel" if is_model else "RewardFunction"


RewardEntry = Annotated[
    Annotated[RewardFunction, Tag("RewardFunction")] | Annotated[RewardModel, Tag("RewardModel")],
    Discriminator(_entry_kind),
]


class OverlongShaping(Section):
    enabled: bool = False
    """DAPO's soft penalty on responses that run into the length limit."""
    buffer_tokens: PositiveInt = 4
    """Length of the penalty ramp before rollout.max_response_tokens."""
    penalty_factor: NonNegativeFloat = 1.0
    """Penalty at the length limit (the ramp goes from 0 to -penalty_factor)."""


class Reward(Section):
    functions: list[RewardEntry] = Field([RewardFunction(fn="rlrun:exact_match")])
    """The reward functions (and reward models), summed with their weights; with an agent whose
    environment has get_reward, rlrun:environment_reward x 1 joins them unless listed (TRL's rule),
    and the list may be empty."""
    overlong_shaping: OverlongShaping = OverlongShaping()
    """DAPO's overlong reward shaping."""
