"""An option a command does not have: one line on stderr saying which and where to read
the command's options, a suggestion only where the name is a likely typo of one, exit 2."""

from __future__ import annotations

import pytest

from kgctl.cli.app import main
from kgctl.errors import ExitStatus


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        # Click offered "Possible options: --verbose" for these: every long option shares
        # its two dashes with them.
        (["join", "--bogus"], "--bogus is not an option of kgctl join; see 'kgctl join -h'"),
        (
            ["chaos", "run", "member-kill", "--bogus"],
            "--bogus is not an option of kgctl chaos run; see 'kgctl chaos run -h'",
        ),
        (
            ["join", "-g", "g", "t", "--verbos"],
            "--verbos is not an option of kgctl join (did you mean --verbose?); "
            "see 'kgctl join -h'",
        ),
        (
            ["chaos", "run", "member-kill", "--time", "3"],
            "--time is not an option of kgctl chaos run (did you mean --timeout?); "
            "see 'kgctl chaos run -h'",
        ),
        (
            ["join", "-g", "g", "t", "--group-proto", "consumer"],
            "--group-proto is not an option of kgctl join (did you mean --group-protocol?); "
            "see 'kgctl join -h'",
        ),
    ],
)
def test_an_unknown_option_is_named_with_a_typo_suggestion_only_when_it_is_one(
    argv: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == ExitStatus.USAGE
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"kgctl: error: {line}\n")
