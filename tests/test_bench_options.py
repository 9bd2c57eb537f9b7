"""The benchmark's own options (bench/run.py): what `--group-age` and `--trigger-jitter`
accept, and the one-line error for what they do not."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/ is the repository's benchmark package, not installed: import it from the tree.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.run import main  # noqa: E402


def _args(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The options main() parsed, without running anything."""
    seen: dict[str, object] = {}

    def fake_run(args: object) -> dict[str, object]:
        seen.update(vars(args))
        return {}

    monkeypatch.setattr("bench.run.run", fake_run)
    main([*argv, "--out", "/dev/null"])
    return seen


def test_the_group_age_defaults_to_the_one_second_the_bench_always_waited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _args([], monkeypatch)["group_age"] == 1.0


@pytest.mark.parametrize(("text", "seconds"), [("30", 30.0), ("0", 0.0), ("2.5", 2.5)])
def test_a_group_age_is_seconds_zero_or_more(
    text: str, seconds: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _args(["--group-age", text], monkeypatch)["group_age"] == seconds


def test_a_group_age_and_a_trigger_jitter_are_taken_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = _args(["--group-age", "30", "--trigger-jitter", "1000"], monkeypatch)
    assert (args["group_age"], args["trigger_jitter"]) == (30.0, 1000)


@pytest.mark.parametrize(
    ("option", "text", "says"),
    [
        ("--group-age", "-1", "not a number of seconds, 0 or more"),
        ("--group-age", "soon", "not a number of seconds, 0 or more"),
        ("--group-age", "inf", "not a number of seconds, 0 or more"),
        ("--group-age", "nan", "not a number of seconds, 0 or more"),
        ("--trigger-jitter", "-5", "not a whole number of milliseconds, 0 or more"),
        ("--trigger-jitter", "0.5", "not a whole number of milliseconds, 0 or more"),
    ],
)
def test_a_bad_value_is_refused_before_anything_starts_with_a_one_line_error(
    option: str,
    text: str,
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    started: list[object] = []
    monkeypatch.setattr("bench.run.run", started.append)
    with pytest.raises(SystemExit) as exc:
        main([option, text])
    assert exc.value.code == 2
    assert started == []
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: {text!r} is {says}" in last
