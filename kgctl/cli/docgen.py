"""Generated files: docs/cli.md, completions/ and `kgctl join`'s option table (for its
parse without typer, `kgctl.cli.fastparse`) from the typer app, and their checks.

`python -m kgctl.cli.docgen` (what `make docs` runs) rewrites them; `--check` exits 1
naming the stale ones. Tests call `generated()` and compare in memory.
"""

from __future__ import annotations

import enum
import inspect
import io
import sys
import tokenize
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
import typer.main

from kgctl.cli import fastparse
from kgctl.cli.app import JOIN_OPTIONS, app
from kgctl.cli.join import join_command
from kgctl.errors import ExitStatus

ROOT = Path(__file__).resolve().parents[2]
PROG = "kgctl"
COMPLETE_VAR = "_KGCTL_COMPLETE"
SHELLS = {"bash": "kgctl.bash", "zsh": "_kgctl", "fish": "kgctl.fish"}
REGENERATE = "make docs"  # runs `python -m kgctl.cli.docgen`


# -- walking the app ----------------------------------------------------------------------


def _root_command() -> Any:
    return typer.main.get_command(app)


def walk() -> Iterator[tuple[list[str], Any, Any]]:
    """(path, command, context) for the root and every command, in registration order."""
    root = _root_command()
    ctx = root.context_class(root, info_name=PROG)

    def visit(path: list[str], cmd: Any, ctx: Any) -> Iterator[tuple[list[str], Any, Any]]:
        yield path, cmd, ctx
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is None or getattr(sub, "hidden", False):
                    continue
                sub_ctx = sub.context_class(sub, info_name=name, parent=ctx)
                yield from visit(path + [name], sub, sub_ctx)

    yield from visit([PROG], root, ctx)


def missing_help() -> list[str]:
    """Every command, option and argument without help text, as `kgctl watch --x`."""
    out: list[str] = []
    for path, cmd, _ctx in walk():
        if not (cmd.help or "").strip():
            out.append(" ".join(path))
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            if not (getattr(p, "help", None) or "").strip():
                out.append(f"{' '.join(path)} {_param_name(p)}")
    return out


def _param_name(p: Any) -> str:
    if p.param_type_name == "argument":
        return str(p.name).upper()
    return ", ".join(p.opts + p.secondary_opts)


# -- docs/cli.md ------------------------------------------------------------------------


def exit_statuses() -> list[tuple[int, str, str]]:
    """(code, name, meaning) from the comments beside ExitStatus's members in errors.py."""
    source = inspect.getsource(ExitStatus)
    comments: dict[str, str] = {}
    last_name = ""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.start[1] == 4:
            last_name = tok.string
        elif tok.type == tokenize.COMMENT and last_name:
            comments[last_name] = tok.string.lstrip("#").strip()
        elif tok.type == tokenize.NEWLINE:
            last_name = ""
    out = []
    for status in ExitStatus:
        meaning = comments.get(status.name, "")
        if status is ExitStatus.OK and not meaning:
            meaning = "success"
        out.append((int(status), status.name, meaning))
    return out


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _value(p: Any, ctx: Any) -> str:
    if getattr(p, "is_flag", False):
        return ""
    annotation = getattr(getattr(p, "type_descriptor", None), "annotation", None)
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args:
        annotation = args[0]
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        text = "|".join(str(m.value) for m in annotation)
        return text + (" (repeatable)" if getattr(p, "multiple", False) else "")
    if p.param_type_name == "argument":
        name = p.name.upper()
        return f"{name}…" if p.nargs == -1 else name
    names = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH"}
    text = names.get(annotation, "VALUE") if inspect.isclass(annotation) else "VALUE"
    return text + (" (repeatable)" if getattr(p, "multiple", False) else "")


def _default(p: Any) -> str:
    if p.param_type_name == "argument" and p.required:
        return "required"
    if p.required:
        return "required"
    if getattr(p, "show_default", True) is False or getattr(p, "is_flag", False):
        return ""
    value = p.default
    if value is None or value == [] or value == "" or callable(value):
        return ""
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{value}`"


def _command_section(path: list[str], cmd: Any, ctx: Any) -> str:
    level = "#" * min(len(path) + 1, 4)
    title = " ".join(path)
    lines = [f"{level} `{title}`", ""]
    usage = cmd.get_usage(ctx).replace("Usage: ", "")
    lines += ["```", usage, "```", ""]
    help_text = inspect.cleandoc(cmd.help or "").replace("\b\n", "")
    lines += [help_text, ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    if params:
        lines += [
            "| option | value | default | help |",
            "|---|---|---|---|",
        ]
        for p in params:
            help_ = getattr(p, "help", "") or ""
            if getattr(p, "envvar", None):
                help_ += f" (env: `{p.envvar}`)"
            value = _value(p, ctx)
            lines.append(
                f"| `{_param_name(p)}` | {f'`{value}`' if value else ''} | {_default(p)} "
                f"| {_cell(help_)} |"
            )
        lines.append("")
    subs = [name for name in getattr(cmd, "list_commands", lambda c: [])(ctx)]
    if subs and len(path) > 1:
        lines += ["Commands: " + ", ".join(f"`{' '.join(path + [s])}`" for s in subs), ""]
    return "\n".join(lines)


def cli_markdown() -> str:
    """docs/cli.md: every command and option, and the exit statuses."""
    out = [
        "# CLI reference",
        "",
        f"<!-- Generated from the typer app by `python -m kgctl.cli.docgen` ({REGENERATE}); "
        "do not edit by hand. -->",
        "",
        "Every command also takes `-h`/`--help`. Commands and options are listed in the",
        "order `kgctl --help` shows them. Shell completion: docs/completions.md.",
        "",
    ]
    sections = list(walk())
    out.append("Commands: " + ", ".join(f"`{' '.join(p)}`" for p, _c, _x in sections[1:]))
    out.append("")
    for path, cmd, ctx in sections:
        out.append(_command_section(path, cmd, ctx))
    out += [
        "## Exit status",
        "",
        "`kgctl.errors.ExitStatus`; one place (`kgctl/cli/base.py`, `run()`) maps errors to them.",
        "",
        "| code | name | meaning |",
        "|---|---|---|",
    ]
    for code, name, meaning in exit_statuses():
        out.append(f"| {code} | `{name}` | {_cell(meaning)} |")
    return "\n".join(out).rstrip() + "\n"


# -- completions/ -------------------------------------------------------------------------


def completion_script(shell: str) -> str:
    """What `_KGCTL_COMPLETE=source_<shell> kgctl` prints, generated in this process."""
    # typer keeps the script templates in a private module; the test that compares the
    # checked-in files with `_KGCTL_COMPLETE=source_<shell> kgctl` guards against drift.
    from typer._completion_shared import get_completion_script

    script = get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell)
    return script.rstrip("\n") + "\n"


def generated() -> dict[Path, str]:
    """Every generated file, relative to the repository root, with its content."""
    files = {
        Path("docs/cli.md"): cli_markdown(),
        JOIN_OPTIONS.resolve().relative_to(ROOT): fastparse.table_json(join_command),
    }
    for shell, name in SHELLS.items():
        files[Path("completions") / name] = completion_script(shell)
    return files


def stale(root: Path = ROOT) -> list[Path]:
    out = []
    for rel, text in generated().items():
        path = root / rel
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            out.append(rel)
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        bad = stale()
        for rel in bad:
            print(f"{rel} is stale: run `{REGENERATE}`", file=sys.stderr)
        return 1 if bad else 0
    for rel, text in generated().items():
        path = ROOT / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
