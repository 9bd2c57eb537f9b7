"""A command line parsed without typer, from a table made of the command's typer declarations.

Importing typer (and its click) and letting it parse cost a `kgctl join` process more CPU
than the rest of kgctl's start-up (docs/benchmarks.md, "Start-up"), paid again by every
member a fleet starts. The options stay declared once, for typer (`Annotated[...,
typer.Option(...)]` in `kgctl/cli/join.py`: help, docs/cli.md, completions). `declared`
reads those declarations into plain specs; `make docs` writes them to
`kgctl/cli/join_options.json` (a test fails when that file is stale), and `parse` reads
the table with no typer imported. It builds the command's keyword arguments for the plain
cases: long and short options, `--x=v`, flags, repeatable options, enums, numbers with
their `min`/`max`, paths, environment variables, positional arguments and `--`.
Anything else (help, an unknown option, a value it cannot convert or that breaks a bound)
returns None, and the caller hands the whole command line to typer, which parses it or
says what is wrong in its own words. A declaration it cannot follow (a callback, a
prompt, a path that must exist, ...) makes the whole table empty: typer parses every
command line. So it accepts a subset of what typer accepts and, on that subset, gives what
typer gives (tests/test_fastparse.py compares the two, option by option).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Scalar kinds by their name in the table.
_KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "path": Path, "bool": bool}
# typer.Option settings that change parsing in ways `parse` does not follow, with the value
# that leaves parsing as `parse` does it.
_PLAIN_SETTINGS: dict[str, Any] = {
    "callback": None,
    "parser": None,
    "default_factory": None,
    "expose_value": True,
    "prompt": False,
    "is_flag": None,
    "flag_value": None,
    "count": False,
    "clamp": False,
    "case_sensitive": True,
    "exists": False,
    "file_okay": True,
    "dir_okay": True,
    "writable": False,
    "resolve_path": False,
    "path_type": None,
}


class Spec:
    """One parameter of the command, as the table says it."""

    __slots__ = (
        "argument",
        "default",
        "envvar",
        "flag",
        "high",
        "kind",
        "low",
        "many",
        "name",
        "names",
    )

    def __init__(self, row: dict[str, Any]) -> None:
        self.name: str = row["name"]
        kind = row["kind"]
        self.kind: Callable[[str], Any] = (
            _KINDS[kind] if kind in _KINDS else _enum(kind)  # "module:Class" for an enum
        )
        self.many: bool = row["many"]
        self.flag: bool = self.kind is bool and not self.many
        self.argument: bool = row["argument"]
        self.names: dict[str, bool] = row["names"]
        self.low = row.get("min")
        self.high = row.get("max")
        self.envvar: str | None = row.get("envvar")
        default = row["default"]
        if default is not None and self.kind not in (str, int, float, bool):
            default = self.kind(default)  # an enum member or a Path
        self.default = default


def _enum(ref: str) -> Callable[[str], Any]:
    module, _, name = ref.partition(":")
    found: Callable[[str], Any] = getattr(importlib.import_module(module), name)
    return found


def load(path: Path) -> list[Spec] | None:
    """The table `make docs` wrote (None: typer parses every command line)."""
    rows = json.loads(path.read_text(encoding="utf-8"))["params"]
    return None if rows is None else [Spec(row) for row in rows]


# -- the table, from typer's declarations (make docs, tests) ------------------------------


def declared(func: Callable[..., Any]) -> list[dict[str, Any]] | None:
    """The table's rows for `func`'s typer declarations, or None when one of them is more
    than `parse` follows."""
    from typer.models import ArgumentInfo, OptionInfo

    hints = typing.get_type_hints(func, include_extras=True)
    rows = []
    for name, sig in inspect.signature(func).parameters.items():
        annotation = hints.get(name)
        if typing.get_origin(annotation) is not typing.Annotated:
            return None
        base, *extras = typing.get_args(annotation)
        info = next((e for e in extras if isinstance(e, OptionInfo | ArgumentInfo)), None)
        found = _scalar(base)
        if info is None or found is None or sig.default is inspect.Parameter.empty:
            return None
        if any(getattr(info, k, v) != v for k, v in _PLAIN_SETTINGS.items()):
            return None
        envvar = getattr(info, "envvar", None)
        if envvar is not None and not isinstance(envvar, str):
            return None
        kind, many = found
        argument = isinstance(info, ArgumentInfo)
        row: dict[str, Any] = {
            "name": name,
            "kind": _kind_name(kind),
            "many": many,
            "argument": argument,
            "names": {} if argument else _names(name, kind is bool and not many, info),
            "default": _plain(sig.default),
        }
        for key in ("min", "max", "envvar"):
            if getattr(info, key, None) is not None:
                row[key] = getattr(info, key)
        rows.append(row)
    return rows


def table_json(func: Callable[..., Any]) -> str:
    """The generated file's text: `func`'s table, one parameter a line."""
    source = f"{func.__module__}.{func.__qualname__}"
    rows = declared(func)
    params = "null" if rows is None else "[\n  " + ",\n  ".join(map(json.dumps, rows)) + "\n ]"
    note = json.dumps(f"by `make docs` from the typer declarations of {source}; do not edit")
    return f'{{\n "generated": {note},\n "params": {params}\n}}\n'


def _scalar(annotation: Any) -> tuple[type, bool] | None:
    """(scalar type, is a list) for `X`, `X | None`, `list[X]`, `list[X] | None`."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) != 1:
            return None
        annotation, origin = rest[0], typing.get_origin(rest[0])
    many = False
    if origin is list:
        (annotation,) = typing.get_args(annotation)
        many = True
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, enum.Enum) or annotation in _KINDS.values():
        return annotation, many
    return None


def _kind_name(kind: type) -> str:
    if issubclass(kind, enum.Enum):
        return f"{kind.__module__}:{kind.__qualname__}"
    return next(name for name, known in _KINDS.items() if known is kind)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


def _names(name: str, flag: bool, info: Any) -> dict[str, bool]:
    """The option's spellings; each maps to the value a flag takes when it is given."""
    decls = list(info.param_decls or ())
    # In `Annotated`, typer reads Option's first positional (stored as its default) as
    # the first spelling.
    if isinstance(info.default, str) and info.default.startswith("-"):
        decls.insert(0, info.default)
    if not decls:
        dashed = "--" + name.replace("_", "-")
        decls = [f"{dashed}/--no-{name.replace('_', '-')}"] if flag else [dashed]
    names: dict[str, bool] = {}
    for decl in decls:
        on, _, off = decl.partition("/")
        names[on.strip()] = True
        if off:
            names[off.strip()] = False
    return names


# -- parsing, with no typer --------------------------------------------------------------


class _CannotParse(Exception):
    """Leave this command line to typer."""


def _convert(param: Spec, text: str) -> Any:
    try:
        value = param.kind(text)
    except (ValueError, TypeError):
        raise _CannotParse from None
    if param.kind in (int, float):
        if (param.low is not None and value < param.low) or (
            param.high is not None and value > param.high
        ):
            raise _CannotParse
    return value


def parse(params: list[Spec] | None, argv: list[str]) -> dict[str, Any] | None:
    """The command's keyword arguments for `argv`, or None when typer should parse it."""
    if params is None:
        return None
    options: dict[str, tuple[Spec, bool]] = {}
    for p in params:
        for spelling, on in p.names.items():
            options[spelling] = (p, on)
    arguments = [p for p in params if p.argument]
    try:
        given, positionals = _scan(options, argv)
        _place(arguments, positionals, given)
        _from_environment(params, given)
    except _CannotParse:
        return None
    return {p.name: given.get(p.name, p.default) for p in params}


def _scan(
    options: dict[str, tuple[Spec, bool]], argv: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """Options' values by parameter name, and the positional words, in order."""
    given: dict[str, Any] = {}
    positionals: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            positionals.extend(argv[i:])
            break
        if not token.startswith("-") or token == "-":
            positionals.append(token)
            continue
        spelling, eq, inline = token.partition("=")
        # `-o=json` is no `=` form to click: a short option takes the rest of its word
        # ("=json") as its value; typer says what that means.
        if spelling not in options or (eq and not spelling.startswith("--")):
            raise _CannotParse
        param, on = options[spelling]
        if param.flag:
            if eq:
                raise _CannotParse
            given[param.name] = on
            continue
        if eq:
            text = inline
        elif i < len(argv):
            text, i = argv[i], i + 1
        else:
            raise _CannotParse
        value = _convert(param, text)
        if param.many:
            given.setdefault(param.name, []).append(value)
        else:
            given[param.name] = value
    return given, positionals


def _from_environment(params: list[Spec], given: dict[str, Any]) -> None:
    for p in params:
        if p.name not in given and p.envvar is not None and os.environ.get(p.envvar):
            if p.many or p.flag:
                raise _CannotParse
            given[p.name] = _convert(p, os.environ[p.envvar])


def _place(arguments: list[Spec], positionals: list[str], given: dict[str, Any]) -> None:
    """Positional words onto the arguments: one each, a list takes the rest."""
    if sum(1 for a in arguments if a.many) > 1:
        raise _CannotParse
    fixed = sum(1 for a in arguments if not a.many)
    words = list(positionals)
    for arg in arguments:
        if arg.many:
            take = len(words) - (fixed - 1 if fixed else 0)
            chunk, words = words[: max(take, 0)], words[max(take, 0) :]
            if chunk:
                given[arg.name] = [_convert(arg, w) for w in chunk]
        else:
            fixed -= 1
            if not words:
                raise _CannotParse  # a required argument missing: typer says so
            given[arg.name] = _convert(arg, words.pop(0))
    if words:
        raise _CannotParse
