"""The `rlrun` command line: a thin layer over the library. Each command is one module here that
parses its arguments, makes one call into the library and prints what the library hands back
(tables are drawn by the package that owns the data). A recipe mistake prints located
paragraphs and exits with code 2, never with a traceback.

| module       | commands                                                 |
| ------------ | -------------------------------------------------------- |
| `recipes.py` | validate, show, schema, recipes (list, copy), components |
| `train.py`   | train, resume, export                                    |
| `eval.py`    | eval                                                     |
| `compare.py` | compare                                                  |
| `sweep.py`   | sweep                                                    |
| `convert.py` | convert verl, convert trl                                |

`_app.py` holds what they share: the Typer app, the consoles, exit codes, the recipe arguments
and `user_errors`. A new command is a function decorated with `@app.command()` in the module of
its group; wrap library calls that can raise user errors in `with user_errors():`.
"""

# Each module registers its commands on import; `rlrun --help` lists them in this order.
# isort: off
from rlrun.cli import recipes, train, eval, compare, sweep, convert  # noqa: F401
from rlrun.cli._app import app

# isort: on

__all__ = ["app"]
