"""Views of folded state: pure functions from state to rich renderables, and the loops
that draw them."""

from __future__ import annotations

from typing import Any

from rich.console import Console


def plain_console(**options: Any) -> Console:
    """A rich console that prints every text as given: no markup, no emoji codes. What
    the views print is the user's (group, member, client and instance ids): rich read
    "[/x]" in a client id as a closing tag and failed, and "[bold]" or ":fire:" in one as
    styling. kgctl's own styles are set on `Text`, never written in the strings."""
    return Console(markup=False, emoji=False, **options)
