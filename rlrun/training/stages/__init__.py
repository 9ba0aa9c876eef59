"""The registered stages of a training step, imported in the order a step runs them (see
`base` for what a stage declares and how a pipeline is built)."""

# isort: off
from rlrun.training.stages import sampling as _sampling  # noqa: F401  (registers its stages: first)
from rlrun.training.stages import scoring as _scoring  # noqa: F401
from rlrun.training.stages import advantages as _advantages  # noqa: F401
from rlrun.training.stages import updates as _updates  # noqa: F401
from rlrun.training.stages import metrics as _metrics  # noqa: F401  (last)
from rlrun.training.stages import callbacks as _callbacks  # noqa: F401  (placed after "sample")

# isort: on
from rlrun.training.stages.base import STAGES, Pipeline, PipelineError, Stage, StepBatch, register_stage

__all__ = ["STAGES", "Pipeline", "PipelineError", "Stage", "StepBatch", "register_stage"]
