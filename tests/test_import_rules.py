"""The layers of docs/architecture.md hold in the code: every kgctl module's imports (read
with ast, lazy ones inside functions included) are checked against the table's "may
import" column, kafka-python is imported by the adapters only, the model by nothing but
the standard library, and no two packages import each other (directly or round a cycle).

A new package needs its row in the table first; a new import across layers needs the
table to allow it (and a reason to, in the same change)."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kgctl"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]  # dotted prefixes: kgctl.model, kgctl.settings
    may_import: tuple[str, ...]  # the table's words: model, settings, everything, stdlib


def layers() -> list[Layer]:
    """The layer table of docs/architecture.md (its first table with a "may import")."""
    rows = []
    in_table = False
    for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| layer |") and "may import" in line:
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set(cells[0]) <= {"-"}:
                continue
            folders = re.findall(r"`(kgctl/[\w/]*?)(?:\.py)?/?`", cells[1])
            modules = tuple(f.replace("/", ".") for f in folders)
            allowed = tuple(w.strip() for w in cells[-1].split(",") if w.strip())
            rows.append(Layer(cells[0], modules, allowed))
    assert rows, "docs/architecture.md has no layer table"
    return rows


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in the file, relative ones resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            yield node.lineno, base
            # `from kgctl.adapters import clients` imports the module kgctl.adapters.clients
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def layer_of(module: str, table: list[Layer]) -> Layer | None:
    best: tuple[int, Layer] | None = None
    for layer in table:
        for prefix in layer.modules:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), layer)
    return best[1] if best else None


def kgctl_modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def existing(module: str) -> bool:
    """A kgctl module or package (not a name imported from one)."""
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


# The package root (`kgctl.__version__`) and the `python -m kgctl` entry are outside the
# layers: anyone may read the version, and the entry only starts the CLI.
OUTSIDE = {"kgctl", "kgctl.__main__"}


def violations() -> list[str]:
    table = layers()
    by_word = {layer.name.split()[0]: layer for layer in table}
    found = []
    for path in kgctl_modules():
        name = module_name(path)
        if name in OUTSIDE:
            continue
        layer = layer_of(name, table)
        rel = path.relative_to(ROOT)
        if layer is None:
            found.append(f"{rel}: in no layer of docs/architecture.md (add its row)")
            continue
        for lineno, imported in imports_of(path):
            top = imported.split(".")[0]
            if top == "kafka" and layer.name != "adapters":
                found.append(f"{rel}:{lineno}: imports kafka ({imported}); only adapters may")
            if top != "kgctl":
                if "stdlib" in layer.may_import and top not in sys.stdlib_module_names:
                    found.append(f"{rel}:{lineno}: {layer.name} imports {imported} (stdlib only)")
                continue
            if imported in OUTSIDE or not existing(imported):
                continue
            target = layer_of(imported, table)
            if target is None or target is layer or "everything" in layer.may_import:
                continue
            if not any(by_word.get(word) is target for word in layer.may_import):
                found.append(
                    f"{rel}:{lineno}: {layer.name} imports {imported} ({target.name}); "
                    f"docs/architecture.md lets {layer.name} import {', '.join(layer.may_import)}"
                )
    return found


def package_of(module: str) -> str:
    """kgctl.adapters.clients -> kgctl.adapters; kgctl.settings stays itself."""
    parts = module.split(".")
    if len(parts) > 2 or (ROOT / "kgctl" / parts[-1]).is_dir():
        return ".".join(parts[:2])
    return module


def package_cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for path in kgctl_modules():
        name = module_name(path)
        if name in OUTSIDE:
            continue
        source = package_of(name)
        for _lineno, imported in imports_of(path):
            if imported.split(".")[0] != "kgctl" or imported in OUTSIDE or not existing(imported):
                continue
            target = package_of(imported)
            if target != source:
                graph.setdefault(source, set()).add(target)
    cycles: list[list[str]] = []
    seen: set[frozenset[str]] = set()

    def walk(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in trail:
                cycle = trail[trail.index(nxt) :] + [nxt]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    cycles.append(cycle)
            elif len(trail) < len(graph) + 1:
                walk(nxt, [*trail, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return cycles


def test_every_import_is_one_the_layer_table_allows() -> None:
    found = violations()
    assert not found, "imports the layers forbid:\n" + "\n".join(found)


def test_no_two_packages_import_each_other() -> None:
    cycles = package_cycles()
    assert not cycles, "import cycles between packages:\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


def test_the_table_states_the_rules_the_issue_named() -> None:
    # The rules are read from the document; these are the ones it must keep saying.
    table = {layer.name: layer for layer in layers()}
    assert table["model"].may_import == ("stdlib",)
    assert "member" not in table["adapters"].may_import
    assert "render" not in table["chaos"].may_import
