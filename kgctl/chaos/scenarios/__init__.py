"""The built-in scenarios, shipped as package data (`*.yaml` next to this module)."""

from __future__ import annotations

from importlib import resources

from kgctl.chaos.scenario import Scenario, parse_scenario
from kgctl.errors import NotFoundError


def builtin_names() -> list[str]:
    """Names of the built-in scenarios, sorted (for `chaos list` and shell completion)."""
    files = resources.files(__name__)
    return sorted(p.name[: -len(".yaml")] for p in files.iterdir() if p.name.endswith(".yaml"))


def builtin_text(name: str) -> str:
    """The YAML of a built-in scenario."""
    if name not in builtin_names():
        raise NotFoundError(
            f"no built-in scenario {name!r}; built-ins: {', '.join(builtin_names())}"
        )
    return (resources.files(__name__) / f"{name}.yaml").read_text(encoding="utf-8")


def builtin(name: str) -> Scenario:
    """A built-in scenario, validated."""
    return parse_scenario(builtin_text(name), f"{name}.yaml")
