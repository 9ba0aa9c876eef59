"""The verl command in a launch script, read the way bash would run it, without running anything.

lex     <- the script as commands of words: quotes, backslash-newline continuations, comments,
           `$(...)` / `$((...))` / `${...}` kept whole, `;` `&&` `|` newlines as separators,
           `NAME=(...)` bash arrays
expand  <- each word's variables from the assignments before it (and the environment):
           `$X`, `${X}`, `${X:-default}`, `${X:=default}`, `$((arithmetic))` on known values
result  <- the words after `python3 -m MODULE` of the first command that runs a verl trainer
           (behind `VAR=1`, `env`, `ray job submit ... --`, `torchrun` alike)

A value bash would take from outside the script (an unset variable, `$(command)`) cannot be known
here: it stays as written, as an `Unresolved` string naming what it waits on, so the converter can
refuse exactly the keys that need it. A variable assigned such a value waits on what the value
waits on (`NNODES=${SLURM_JOB_NUM_NODES}`: `$NNODES` names `$SLURM_JOB_NUM_NODES`, which the user
can set). The script's arguments are the ones it is given (`$1`, `$@`), none by default.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import yaml

MAX_SCRIPT_CHARS = 1_000_000  # launch scripts are a few kB

_SEPARATORS = {"\n", ";", "&", "|", "&&", "||", ";;", "(", ")"}
_REDIRECT = re.compile(r"^\d*(?:>>?|<|>&|&>)")
_NAME = r"[A-Za-z_]\w*"


class ShellError(ValueError):
    """The script cannot be read as bash would read it (with the line)."""


class Unresolved(str):
    """A value with parts only known when the script runs: `names` says which."""

    names: tuple[str, ...] = ()


# Reports and refusals show such a value as the text it is.
yaml.SafeDumper.add_representer(Unresolved, yaml.representer.SafeRepresenter.represent_str)


def unresolved(text: str, names: tuple[str, ...]) -> Unresolved:
    value = Unresolved(text)
    value.names = names
    return value


@dataclass
class Part:
    text: str
    literal: bool  # single-quoted (or backslash-escaped): no expansion
    quoted: bool = False


@dataclass
class Word:
    parts: list[Part] = field(default_factory=list)
    line: int = 1
    array: list[Word] | None = None  # `NAME=(a b c)`: the words inside the parentheses

    def raw(self) -> str:
        return "".join(p.text for p in self.parts)


@dataclass
class Command:
    words: list[Word]
    line: int


def lex(text: str) -> list[Command]:
    """The script's simple commands, in order (control words like `if`/`then` are words too)."""
    commands: list[Command] = []
    words: list[Word] = []
    word: Word | None = None
    heredocs: list[tuple[str, bool]] = []  # delimiters of `<<EOF` bodies that start on the next line
    i, line, n = 0, 1, len(text)

    def end_word() -> None:
        nonlocal word
        if word is not None and word.parts:
            words.append(word)
        word = None

    def end_command() -> None:
        nonlocal words
        end_word()
        if words:
            commands.append(Command(words, words[0].line))
        words = []

    def current() -> Word:
        nonlocal word
        if word is None:
            word = Word(line=line)
        return word

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":  # continuation
                i, line = i + 2, line + 1
                continue
            current().parts.append(Part(text[i + 1], literal=True))
            i += 2
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise ShellError(f"line {line}: the single quote opened here is never closed")
            current().parts.append(Part(text[i + 1 : end], literal=True, quoted=True))
            line += text.count("\n", i, end)
            i = end + 1
        elif c == '"':
            end, parts = _double_quoted(text, i + 1, line)
            current().parts.extend(parts)
            line += text.count("\n", i, end)
            i = end + 1
        elif c == "$" and i + 1 < n and text[i + 1] in "({":
            end = _balanced(text, i + 1, line)
            current().parts.append(Part(text[i : end + 1], literal=False))
            line += text.count("\n", i, end)
            i = end + 1
        elif c == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise ShellError(f"line {line}: the backquote opened here is never closed")
            current().parts.append(Part("$(" + text[i + 1 : end] + ")", literal=False))
            line += text.count("\n", i, end)
            i = end + 1
        elif c == "#" and (word is None or not word.parts):
            while i < n and text[i] != "\n":
                i += 1
        elif c == "(" and word is not None and re.fullmatch(_NAME + r"\+?=", word.raw()):
            end = _balanced(text, i, line)
            inner = lex(text[i + 1 : end])
            word.array = [w for command in inner for w in command.words]
            line += text.count("\n", i, end)
            i = end + 1
            end_word()
        elif c in " \t\r":
            end_word()
            i += 1
        elif c == "\n":
            end_command()
            i, line = _skip_heredocs(text, i + 1, line + 1, heredocs)
            heredocs.clear()
        elif text.startswith("<<<", i):  # a here-string: its word follows on the same line
            end_word()
            i += 3
        elif c == "<" and text.startswith("<<", i):
            heredoc = re.match(r"<<(-?)\s*(['\"]?)([\w.-]+)\2", text[i:])
            if heredoc is None:
                raise ShellError(f"line {line}: a `<<` here-document without a delimiter word")
            heredocs.append((heredoc[3], heredoc[1] == "-"))
            end_word()
            i += len(heredoc[0])
        elif c in ";&|()":
            end_command()
            i += 2 if text[i : i + 2] in ("&&", "||", ";;") else 1
        else:
            current().parts.append(Part(c, literal=False))
            i += 1
    end_command()
    return commands


def _skip_heredocs(text: str, i: int, line: int, heredocs: list[tuple[str, bool]]) -> tuple[int, int]:
    """Where the commands go on after the here-document bodies that start at `i` (each up to its
    delimiter line; `<<-` strips leading tabs), and that line's number."""
    for delimiter, tabs in heredocs:
        while i < len(text):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            body_line = text[i:end].lstrip("\t") if tabs else text[i:end]
            i, line = end + 1, line + 1
            if body_line == delimiter:
                break
    return i, line


def _double_quoted(text: str, start: int, line: int) -> tuple[int, list[Part]]:
    """The closing quote's index and the parts of a "..." string that starts at `start`."""
    parts: list[Part] = []
    i = start
    while i < len(text):
        c = text[i]
        if c == '"':
            return i, parts or [Part("", literal=True, quoted=True)]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "\n":
                i += 2
                continue
            escaped = nxt in '"\\$`'
            parts.append(Part(nxt if escaped else "\\" + nxt, literal=True, quoted=True))
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1] in "({":
            end = _balanced(text, i + 1, line)
            parts.append(Part(text[i : end + 1], literal=False, quoted=True))
            i = end + 1
        else:
            parts.append(Part(c, literal=False, quoted=True))
            i += 1
    raise ShellError(f"line {line}: the double quote opened here is never closed")


def _balanced(text: str, start: int, line: int) -> int:
    """The index of the bracket closing the one at `start` (quotes inside skipped)."""
    opening = text[start]
    closing = {"(": ")", "{": "}"}[opening]
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c in "'\"":
            end = text.find(c, i + 1)
            if end < 0:
                break
            i = end + 1
            continue
        if c == "#" and opening == "(" and (i == 0 or text[i - 1] in " \t\n"):  # a comment
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        depth += 1 if c == opening else -1 if c == closing else 0
        if depth == 0:
            return i
        i += 1
    raise ShellError(f"line {line}: the `{opening}` opened here is never closed")


# --- expansion ------------------------------------------------------------------------------


@dataclass
class Shell:
    """The variables known so far, and what the ones that cannot be known wait on."""

    variables: dict[str, str]
    arrays: set[str] = field(default_factory=set)
    unknown: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a variable -> its root unknowns
    arguments: tuple[str, ...] = ()  # the script's own ($1, $@)

    def expand(self, word: Word) -> str:
        """The word as bash would pass it: an `Unresolved` string when a part cannot be known."""
        pieces: list[str] = []
        missing: list[str] = []
        pending: list[str] = []  # adjacent expandable characters, expanded together

        def flush() -> None:
            if pending:
                text, unknown = self.expand_text("".join(pending))
                pieces.append(text)
                missing.extend(unknown)
                pending.clear()

        for part in word.parts:
            if part.literal:
                flush()
                pieces.append(part.text)
            else:
                pending.append(part.text)
        flush()
        value = "".join(pieces)
        return unresolved(value, tuple(dict.fromkeys(missing))) if missing else value

    def expand_text(self, text: str) -> tuple[str, list[str]]:
        """`text` with its `$` expressions expanded, and what it waits on."""
        out: list[str] = []
        missing: list[str] = []
        i = 0
        while i < len(text):
            if text.startswith("$(", i):
                end = _balanced(text, i + 1, 0)
                if text.startswith("$((", i) and text[end - 1] == ")":
                    inner = text[i + 3 : end - 1]
                    value = self.arithmetic(inner)
                    if value is None:
                        missing.append(f"$(({inner.strip()}))")
                    out.append(text[i : end + 1] if value is None else value)
                else:
                    missing.append(f"the command substitution {text[i : end + 1]}")
                    out.append(text[i : end + 1])
                i = end + 1
                continue
            if text.startswith("${", i):
                end = _balanced(text, i + 1, 0)
                value, unknown = self.parameter(text[i + 2 : end])
                out.append(text[i : end + 1] if value is None else value)
                missing += unknown
                i = end + 1
                continue
            plain = re.match(r"\$(" + _NAME + r"|[@*#?$!0-9])", text[i:])
            if plain:
                value, unknown = self.parameter(plain[1])
                out.append(plain[0] if value is None else value)
                missing += unknown
                i += len(plain[0])
                continue
            out.append(text[i])
            i += 1
        return "".join(out), missing

    def parameter(self, inner: str) -> tuple[str | None, list[str]]:
        """`${inner}`'s value and what it waits on."""
        if inner.startswith("#") and len(inner) > 1:
            return None, [f"${{{inner}}}"]  # a length: not needed by any verl setting
        if re.fullmatch(r"[@*](?::.*)?", inner):
            return " ".join(self.arguments), []
        array = re.match(_NAME + r"\[", inner)
        if array or inner.split(":")[0].split("-")[0] in self.arrays:
            name = re.match(_NAME, inner)[0]
            raise ShellError(
                f"`${{{inner}}}` expands the bash array `{name}`, which rlrun does not read: write its "
                "values out as key=value items on the verl command (or pass them to `rlrun convert verl` "
                "as a command line: `rlrun convert verl python3 -m verl.trainer.main_ppo key=value ...`)"
            )
        match = re.fullmatch(r"(" + _NAME + r"|\d+|[?$!])(?:(:?[-=+?])(.*))?", inner, re.DOTALL)
        if match is None:
            return None, [f"${{{inner}}}"]
        name, op, word = match.groups()
        if name in self.unknown:  # set, to a value only the running shell knows
            return None, [f"{root} (through ${name})" for root in self.unknown[name]]
        value = self.variables.get(name)
        is_set = value is not None and (value != "" or not (op or "").startswith(":"))
        if op in ("-", ":-", "=", ":=") and not is_set:
            default, unknown = self.expand_text(word or "")
            default = _unquote(default)
            if op.endswith("="):
                self.variables[name] = default
            return default, unknown
        if op in ("+", ":+"):
            return (self.expand_text(word or "")[0] if is_set else ""), []
        if value is None and name.isdigit():
            return "", []  # a positional argument the script is not given
        if value is None:
            return None, [f"${name}"]
        return value, []

    def arithmetic(self, expression: str) -> str | None:
        names = set(re.findall(r"\$?\{?(" + _NAME + r")\}?", expression))
        if any(name not in self.variables for name in names):
            return None
        text = re.sub(r"\$?\{?(" + _NAME + r")\}?", lambda m: self.variables[m[1]], expression)
        try:
            return str(_integer(ast.parse(text.strip(), mode="eval").body))
        except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
            return None


def _unquote(text: str) -> str:
    """A default written in quotes inside `${X:-"..."}` loses them, as in bash."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.floordiv,  # the shell's integer division
    ast.Mod: operator.mod,
}


def _integer(node: ast.expr) -> int:
    """Shell arithmetic: integers, + - * / % and parentheses only."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _integer(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _integer(node.left), _integer(node.right)
        if isinstance(node.op, ast.Div | ast.Mod) and right:
            quotient = abs(left) // abs(right) * (1 if (left >= 0) == (right >= 0) else -1)
            return quotient if isinstance(node.op, ast.Div) else left - right * quotient
        return _OPERATORS[type(node.op)](left, right)
    raise ValueError("not integer arithmetic")


# --- finding the verl command ---------------------------------------------------------------

_VERL_MODULE = re.compile(r"(?:^|\.)main_\w+$|^verl\.")  # a verl trainer, or a recipe's


@dataclass
class VerlCommand:
    module: str  # the trainer module after `-m` (verl.trainer.main_ppo, recipe.dapo.main_dapo)
    args: list[str]  # the words after it, expanded (`Unresolved` where they cannot be known)
    line: int
    passes_arguments: bool = False  # whether the script's arguments are among them (`$@`)


_ALL_ARGUMENTS = re.compile(r"\$\{?[@*]\}?")  # `$@`, `"${@}"`, `$*`: every argument, word by word


def find_verl_command(
    text: str, environ: dict[str, str], arguments: Sequence[str] = ()
) -> VerlCommand | None:
    """The first command running a verl trainer, its words expanded with the variables the
    script set before it (and `environ`), as when bash runs the script with `arguments`."""
    positional = {str(index): argument for index, argument in enumerate(arguments, 1)}
    shell = Shell({**environ, **positional}, arguments=tuple(arguments))
    for command in lex(text):
        words = command.words
        if words[0].array is not None or _assignment(words[0]) and len(words) == 1:
            _assign(shell, words[0])
            continue
        if words[0].raw() in ("export", "declare", "local", "readonly") and len(words) > 1:
            for word in words[1:]:
                if _assignment(word):
                    _assign(shell, word)
            continue
        module_at = _module_index(words)
        if module_at is None:
            for word in words:  # `: ${NAME:=default}` assigns as a side effect
                if ":=" in word.raw():
                    try:
                        shell.expand(word)
                    except ShellError:
                        pass  # a bash array: refused where the verl command reads it
            continue
        values: list[str] = []
        passes = False
        for word in words[module_at + 1 :]:
            if _REDIRECT.match(word.raw()):
                break
            if _ALL_ARGUMENTS.fullmatch(word.raw()) and not any(part.literal for part in word.parts):
                values += shell.arguments
                passes = True
                continue
            value = shell.expand(word)
            if any(part.quoted or part.literal for part in word.parts) or isinstance(value, Unresolved):
                values.append(value)
            else:  # an unquoted, unescaped expansion splits at whitespace (and vanishes when empty)
                values += value.split()
        return VerlCommand(shell.expand(words[module_at]), values, command.line, passes)
    return None


def _assignment(word: Word) -> bool:
    first = word.parts[0] if word.parts else None
    return first is not None and not first.quoted and re.match(_NAME + r"\+?=", word.raw()) is not None


def _assign(shell: Shell, word: Word) -> None:
    raw = word.raw()
    name = re.match(_NAME, raw)[0]
    if word.array is not None:
        shell.arrays.add(name)
        shell.variables.pop(name, None)
        shell.unknown.pop(name, None)
        return
    try:
        value = shell.expand(Word(_after_equals(word.parts), word.line))
    except ShellError:  # reads a bash array: unknown here, refused where the verl command uses it
        shell.variables.pop(name, None)
        shell.unknown.pop(name, None)
        return
    if isinstance(value, Unresolved):
        shell.variables.pop(name, None)  # unknown from here on, waiting on what its value waits on
        shell.unknown[name] = tuple(dict.fromkeys(root.partition(" (through ")[0] for root in value.names))
        return
    shell.variables[name] = value
    shell.unknown.pop(name, None)
    shell.arrays.discard(name)


def _after_equals(parts: list[Part]) -> list[Part]:
    """The value parts of `NAME=value` (the `=` is in an unquoted part)."""
    for index, part in enumerate(parts):
        if not part.quoted and "=" in part.text:
            rest = part.text.split("=", 1)[1]
            return ([Part(rest, part.literal)] if rest else []) + parts[index + 1 :]
    return []


def _module_index(words: list[Word]) -> int | None:
    """The index of the trainer word in `... python3 -m MODULE ...` (or `python3 main_x.py`)
    when it looks like a verl trainer."""
    for index, word in enumerate(words):
        raw = word.raw()
        if raw == "-m" and index + 1 < len(words) and _VERL_MODULE.search(words[index + 1].raw()):
            return index + 1
        runs_python = index > 0 and re.search(r"python[\d.]*$", words[index - 1].raw())
        if runs_python and re.search(r"(?:^|/)main_\w*\.py$", raw):
            return index
    return None
