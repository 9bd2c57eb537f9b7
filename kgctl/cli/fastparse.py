"""A command line parsed from a command's own typer declarations, without typer's parser.

Typer (0.2x) coerces every parameter through pydantic, whose import and schema building
cost a `kgctl join` process about 0.07 CPU-s: more than the rest of kgctl's start-up,
and paid again by every member a fleet starts (docs/benchmarks.md, "Start-up"). `parse`
reads the same `Annotated[..., typer.Option(...)]` declarations the command already has
and builds its keyword arguments for the plain cases: long and short options, `--x=v`,
flags, repeatable options, enums, numbers with their `min`/`max`, paths, environment
variables, positional arguments and `--`. Anything else (help, an unknown option, a value
it cannot convert or that breaks a bound, a type it does not know) returns None, and the
caller hands the whole command line to typer, which parses it or says what is wrong in
its own words. So it accepts a subset of what typer accepts and, on that subset, gives
what typer gives (tests/test_fastparse.py compares the two).
"""

from __future__ import annotations

import enum
import inspect
import os
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.models import ArgumentInfo, OptionInfo

_SCALARS: tuple[type, ...] = (str, int, float, Path)


@dataclass
class _Param:
    name: str
    kind: type  # the scalar type (str, int, float, Path, bool or an Enum)
    many: bool  # a list: repeatable option or variadic argument
    default: Any
    info: Any
    flag: bool = False


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
    if annotation is bool or issubclass(annotation, enum.Enum) or annotation in _SCALARS:
        return annotation, many
    return None


def _params(func: Callable[..., Any]) -> list[_Param] | None:
    hints = typing.get_type_hints(func, include_extras=True)
    out = []
    for name, sig in inspect.signature(func).parameters.items():
        annotation = hints.get(name)
        if typing.get_origin(annotation) is not typing.Annotated:
            return None
        base, *extras = typing.get_args(annotation)
        info = next((e for e in extras if isinstance(e, OptionInfo | ArgumentInfo)), None)
        found = _scalar(base)
        if info is None or found is None or sig.default is inspect.Parameter.empty:
            return None
        if getattr(info, "callback", None) is not None or getattr(info, "parser", None):
            return None
        kind, many = found
        out.append(_Param(name, kind, many, sig.default, info, flag=kind is bool and not many))
    return out


def _names(param: _Param) -> dict[str, bool]:
    """The option's spellings; each maps to the value a flag takes when it is given."""
    info = param.info
    decls = list(info.param_decls or ())
    # In `Annotated`, typer reads Option's first positional (stored as its default) as
    # the first spelling.
    if isinstance(info.default, str) and info.default.startswith("-"):
        decls.insert(0, info.default)
    if not decls:
        dashed = "--" + param.name.replace("_", "-")
        decls = [f"{dashed}/--no-{param.name.replace('_', '-')}"] if param.flag else [dashed]
    names: dict[str, bool] = {}
    for decl in decls:
        on, _, off = decl.partition("/")
        names[on.strip()] = True
        if off:
            names[off.strip()] = False
    return names


class _CannotParse(Exception):
    """Leave this command line to typer."""


def _convert(param: _Param, text: str) -> Any:
    kind: Callable[[str], Any] = param.kind
    try:
        value = kind(text)
    except (ValueError, TypeError):
        raise _CannotParse from None
    if kind in (int, float):
        low, high = getattr(param.info, "min", None), getattr(param.info, "max", None)
        if (low is not None and value < low) or (high is not None and value > high):
            raise _CannotParse
    return value


def parse(func: Callable[..., Any], argv: list[str]) -> dict[str, Any] | None:
    """`func`'s keyword arguments for `argv`, or None when typer should parse it."""
    params = _params(func)
    if params is None:
        return None
    options: dict[str, tuple[_Param, bool]] = {}
    for p in params:
        if isinstance(p.info, OptionInfo):
            for spelling, on in _names(p).items():
                options[spelling] = (p, on)
    arguments = [p for p in params if isinstance(p.info, ArgumentInfo)]
    try:
        given, positionals = _scan(options, argv)
        _place(arguments, positionals, given)
        _from_environment(params, given)
    except _CannotParse:
        return None
    return {p.name: given.get(p.name, p.default) for p in params}


def _scan(
    options: dict[str, tuple[_Param, bool]], argv: list[str]
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
        if spelling not in options:
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


def _from_environment(params: list[_Param], given: dict[str, Any]) -> None:
    for p in params:
        envvar = getattr(p.info, "envvar", None)
        if p.name not in given and isinstance(envvar, str) and os.environ.get(envvar):
            if p.many or p.flag:
                raise _CannotParse
            given[p.name] = _convert(p, os.environ[envvar])


def _place(arguments: list[_Param], positionals: list[str], given: dict[str, Any]) -> None:
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
