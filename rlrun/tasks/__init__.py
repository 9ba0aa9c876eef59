"""Built-in task generators (prompt + ground-truth answer records)."""

from rlrun.tasks import arithmetic, guess_number

# Each built-in task's settings section in `data` (`data.arithmetic`) -> the `data.source` naming it
GENERATOR_SETTINGS = {"arithmetic": arithmetic.DATA_SOURCE, "guess_number": guess_number.DATA_SOURCE}
