"""`reward`: the weighted reward functions (rules, imported functions and learned reward models)
and DAPO's overlong shaping."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from rlrun.schema.base import NonNegativeFloat, PositiveFloat, PositiveInt, Section


class RewardFunction(Section):
    fn: str = Field(min_length=1)
    weight: float = 1.0

    @property
    def shown(self) -> str:
        """How summaries name this reward."""
        return self.fn


class RewardModel(Section):
    """A Hugging Face sequence-classification model (`AutoModelForSequenceClassification`) as a
    reward: its output on the prompt + response, tokenised by its own tokenizer (through its
    own chat template when it has one), scored `batch_size` at a time on its own device."""

    model: str = Field(min_length=1)  # rlrun:<name> (rlrun:tiny-reward), a local HF dir or a hub id
    weight: float = 1.0
    name: str | None = Field(None, min_length=1)  # metric name; null = the model's last path part
    label: int | str | None = None  # the output to use, by index or id2label name; null = the only one
    score: Literal["logit", "probability"] = "logit"  # probability: sigmoid (one output) or softmax
    shift: float = 0.0  # reported score = (score - shift) / scale: a fixed normalisation, e.g. by
    scale: PositiveFloat = 1.0  # the model's mean/std on your data (`rlrun eval` measures them)
    batch_size: PositiveInt = 32  # sequences per forward pass
    max_tokens: PositiveInt | None = None  # longer inputs keep their last tokens; null = no limit
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto = the GPU when there is one
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    trust_remote_code: bool = False

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
    buffer_tokens: PositiveInt = 4
    penalty_factor: NonNegativeFloat = 1.0


class Reward(Section):
    functions: list[RewardEntry] = Field([RewardFunction(fn="rlrun:exact_match")], min_length=1)
    overlong_shaping: OverlongShaping = OverlongShaping()
