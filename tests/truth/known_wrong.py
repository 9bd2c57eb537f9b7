"""The truth cells kgctl gets wrong today, each with its defect: what kgctl says against
what happened. Each is a strict expected failure: fixing the defect fails the suite until
its line here goes."""

from __future__ import annotations

KNOWN_WRONG: dict[tuple[str, str, str], str] = {}
