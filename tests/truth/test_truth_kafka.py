"""The truth suite: what kgctl says about groups of real librdkafka clients, against what
those clients reported about themselves. One test per client × situation × view; a cell
kgctl gets wrong today is an expected failure with its defect (strict: it fails the suite
once fixed, so the mark must go with the fix). The table in docs/explain.md is this
suite's result; `KGCTL_TRUTH_WRITE=1` rewrites it, otherwise a stale table fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import VIEWS  # noqa: E402
from known_wrong import KNOWN_WRONG  # noqa: E402
from situations import ALL_RUNS, EVERY_RUN, RUNS, Outcome  # noqa: E402

pytestmark = pytest.mark.kafka

DOC = Path(__file__).resolve().parents[2] / "docs" / "explain.md"
START, END = "<!-- truth-table:start -->", "<!-- truth-table:end -->"


def _strict(known: tuple[str, str]) -> bool:
    """A cell wrong only "(sometimes)" (a timing-dependent defect, the others of the cell
    fixed) may pass: a strict expected failure would fail the suite at random."""
    return not all(t.strip().endswith("(sometimes)") for t in known[0].split(","))


def _cells() -> list[object]:
    cells: list[object] = []
    for client, situation in RUNS:
        for view in VIEWS:
            known = KNOWN_WRONG.get((client, situation, view))
            reason = f"{known[0]}: {known[1]}" if known else ""
            marks = [pytest.mark.xfail(strict=_strict(known), reason=reason)] if known else []
            cells.append(
                pytest.param(
                    client, situation, view, id=f"{client}-{situation}-{view}", marks=marks
                )
            )
    return cells


@pytest.mark.parametrize(("client", "situation", "view"), _cells())
def test_kgctl_tells_the_truth(
    truth_outcomes: dict[tuple[str, str], Outcome], client: str, situation: str, view: str
) -> None:
    out = truth_outcomes[(client, situation)]
    assert out.error is None, out.error
    verdict = out.verdicts[view]
    assert not verdict.problems, "; ".join(verdict.details) + _what_was_said(out, view)


def _what_was_said(out: Outcome, view: str) -> str:
    """A wrong cell's evidence, in CI's output (the only thing a CI run keeps): what the
    view said of each rebalance from a little before the action, timed from it, and
    what the members' callbacks said then."""
    if out.truth is None:
        return ""
    action = out.truth.expected.action_ms
    answer = out.answers.get(view) or {}
    lines = [f"\n  {view} of {out.group}; sources: {answer.get('sources')}"]
    for g in answer.get("generations") or []:
        start = g.get("start_ms") or 0
        if start < action - 10_000:
            continue
        t = g.get("trigger") or {}
        lines.append(
            f"  gen {g.get('generation')} at {start - action:+d} ms (took {g.get('duration_ms')}, "
            f"timed {g.get('timed')}): {t.get('cause')} by {t.get('who')!r} "
            f"({t.get('confidence')}): {t.get('evidence')}"
        )
    lines += [f"  note: {n}" for n in answer.get("notes") or []]
    lines += [f"  callback at {c.get('ts_ms', 0) - action:+d} ms: {c}" for c in out.callbacks[:40]]
    return "\n".join(lines)


def table(outcomes: dict[tuple[str, str], Outcome]) -> str:
    lines = [
        "| client | situation | " + " | ".join(VIEWS) + " |",
        "|---|---|" + "---|" * len(VIEWS),
    ]
    for client, situation in RUNS:
        out = outcomes[(client, situation)]
        if out.error is not None:
            cells = ["run failed"] * len(VIEWS)
        else:
            cells = [_cell(client, situation, view, out) for view in VIEWS]
        lines.append(f"| {client} | {situation} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(client: str, situation: str, view: str, out: Outcome) -> str:
    """A cell's text: a cell wrong as known shows its known tags (the numbers, and a
    timing-dependent second defect, move from run to run; the table must not)."""
    verdict = out.verdicts[view]
    known = KNOWN_WRONG.get((client, situation, view))
    if known and (verdict.problems or not _strict(known)):
        # (A cell wrong only sometimes shows its tags in every run: the table must not
        # move with the timing.)
        return f"✗ {known[0]}"
    return verdict.cell()


def test_the_docs_table_is_this_suites_result(
    truth_outcomes: dict[tuple[str, str], Outcome],
) -> None:
    if RUNS != ALL_RUNS:
        pytest.skip("KGCTL_TRUTH_ONLY runs a slice of the suite: the table needs all of it")
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    fresh = f"{head}{START}\n{table(truth_outcomes)}\n{END}{tail}"
    if os.environ.get("KGCTL_TRUTH_WRITE") == "1":
        DOC.write_text(fresh)
        return
    assert text == fresh, (
        "docs/explain.md's truth table is stale: rerun with KGCTL_TRUTH_WRITE=1 "
        "(pytest tests/truth) and commit it"
    )


def test_every_known_wrong_cell_is_a_cell() -> None:
    cells = {(c, s, v) for c, s in EVERY_RUN for v in VIEWS}
    assert set(KNOWN_WRONG) <= cells, set(KNOWN_WRONG) - cells
