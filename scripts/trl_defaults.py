"""Check or regenerate rlrun/convert/trl_defaults.py from the TRL installed here.

The file mirrors the defaults of TRL's config classes (and of the transformers
`TrainingArguments` they extend) for `rlrun convert trl`. This script reads them from the
installed packages' dataclasses, writes the module they make, and compares it with the file:

    python scripts/trl_defaults.py           # check: exit 1, with the difference, when they differ
    python scripts/trl_defaults.py --write   # rewrite the file from the installed TRL

`pip install trl==1.16.0` (the `bench` extra) installs the TRL the file describes.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import enum
import inspect
import json
import sys
from pathlib import Path
from typing import Any

MIRROR = Path(__file__).resolve().parents[1] / "rlrun" / "convert" / "trl_defaults.py"


def default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    value = field.default
    return value.value if isinstance(value, enum.Enum) else value


def literal(value: Any) -> str:
    """`value` as Python source in ruff's style (double-quoted strings)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def declared(cls: type, *, inherited: bool = False) -> dict[str, Any]:
    """A dataclass's fields and their defaults: all of them, or those it declares itself (in the
    order it declares them)."""
    fields = {field.name: field for field in dataclasses.fields(cls)}
    names = fields if inherited else inspect.get_annotations(cls)
    return {name: default(fields[name]) for name in names if name in fields}


def sections() -> tuple[dict[str, str], list[tuple[str, str, dict[str, Any]]]]:
    """The versions read, and each table: (name, what it mirrors, its defaults)."""
    import transformers
    import trl
    from trl import GRPOConfig, ModelConfig, RLOOConfig
    from trl.scripts.grpo import GRPOScriptArguments
    from trl.scripts.utils import DatasetMixtureConfig, ScriptArguments
    from trl.trainer.base_config import _BaseConfig

    versions = {"TRL_VERSION": trl.__version__, "TRANSFORMERS_VERSION": transformers.__version__}
    script = {
        **declared(ScriptArguments, inherited=True),
        **declared(DatasetMixtureConfig, inherited=True),
        **declared(GRPOScriptArguments),
    }
    return versions, [
        (
            "TRAINING_ARGUMENTS",
            "transformers.TrainingArguments",
            declared(transformers.TrainingArguments, inherited=True),
        ),
        ("BASE_CONFIG", "trl.trainer.base_config._BaseConfig (bf16=None: `not fp16`)", declared(_BaseConfig)),
        ("GRPO_CONFIG", "trl.GRPOConfig's own fields", declared(GRPOConfig)),
        ("RLOO_CONFIG", "trl.RLOOConfig's own fields", declared(RLOOConfig)),
        ("MODEL_CONFIG", "trl.ModelConfig (the `trl` scripts' model and LoRA keys)", declared(ModelConfig)),
        (
            "SCRIPT_ARGUMENTS",
            "trl.ScriptArguments, DatasetMixtureConfig and GRPOScriptArguments (`trl grpo`)",
            script,
        ),
    ]


def module_text() -> str:
    """rlrun/convert/trl_defaults.py as the installed TRL makes it."""
    versions, tables = sections()
    lines = [
        f'"""The defaults of TRL {versions["TRL_VERSION"]}\'s config classes (trl/trainer/*_config.py, trl/scripts/)',
        "and of the transformers `TrainingArguments` they extend, for `rlrun convert trl`. A key of these",
        "classes the converter has no rule for is accepted only at its default here. Written by",
        "scripts/trl_defaults.py from the installed packages, which also checks it (`--write` rewrites it).",
        '"""',
        "",
        "from typing import Any",
        "",
        *(f'{name} = "{version}"' for name, version in versions.items()),
    ]
    for name, origin, table in tables:
        lines += ["", f"# {origin}", f"{name}: dict[str, Any] = {{"]
        lines += [f"    {literal(key)}: {literal(value)}," for key, value in table.items()]
        lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the file from the installed TRL")
    args = parser.parse_args(argv)
    try:
        text = module_text()
    except ImportError as err:
        print(f"TRL is not installed here ({err}): pip install trl==1.16.0", file=sys.stderr)
        return 2
    if args.write:
        MIRROR.write_text(text, encoding="utf-8")
        print(f"wrote {MIRROR}")
        return 0
    current = MIRROR.read_text(encoding="utf-8")
    if current == text:
        print(f"{MIRROR.name} equals the installed TRL's defaults")
        return 0
    diff = difflib.unified_diff(
        current.splitlines(), text.splitlines(), f"{MIRROR.name} (the file)", "the installed TRL", lineterm=""
    )
    print("\n".join(diff))
    print(
        f"{MIRROR.name} differs from the installed TRL's defaults (above); `--write` rewrites it",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
