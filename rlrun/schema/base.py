"""What every recipe section shares: unknown keys are errors, types are not coerced."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    """A recipe mapping. `extra="forbid"` turns a typo into an error instead of a silent default;
    `strict` keeps `"8"` from becoming 8 (YAML already gives numbers their types);
    `allow_inf_nan=False` makes every float finite (`.inf` and `.nan` are YAML floats, and
    no setting of a recipe means them). The string under each field is its description
    (`rlrun schema`, editors): the one place keys are documented."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        validate_default=True,
        allow_inf_nan=False,
        use_attribute_docstrings=True,
    )


PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class Optimizer(Section):
    """AdamW."""

    lr: PositiveFloat = 1.0e-4
    """Learning rate."""
    weight_decay: NonNegativeFloat = 0.0
    """Decoupled weight decay."""
    betas: Annotated[list[Annotated[float, Field(ge=0, lt=1)]], Field(min_length=2, max_length=2)] = [
        0.9,
        0.99,
    ]
    """Adam's moment decay rates."""
    eps: PositiveFloat = 1.0e-8
    """Adam's denominator epsilon."""
