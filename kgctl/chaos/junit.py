"""A chaos journal as JUnit XML (`kgctl chaos run --junit-xml FILE`) for CI systems.

One test suite per run; a test case per step (failed when the step did not settle or a
violation was charged to it, skipped when the run never reached it) and one per
invariant checked (failed with every violation of that rule). A run that could not be
set up is one failed case, `setup`, with its error.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from kgctl.chaos.journal import Journal, ViolationRecord
from kgctl.errors import UsageError


def _failure(case: ET.Element, violations: list[ViolationRecord], fallback: str) -> None:
    message = violations[0].message if violations else fallback
    node = ET.SubElement(
        case, "failure", message=message, type=violations[0].rule if violations else "step"
    )
    node.text = (
        "\n".join(
            f"{v.rule} [step {v.step}] {' '.join(v.members)} {v.partition}: {v.message}".replace(
                "  ", " "
            )
            for v in violations
        )
        or fallback
    )


def junit_xml(journal: Journal) -> str:
    """The journal as a JUnit XML document."""
    suite = ET.Element("testsuite", name=f"kgctl chaos {journal.scenario}")
    cases: list[ET.Element] = []
    duration = ((journal.finished_ms or journal.started_ms) - journal.started_ms) / 1000
    prefix = f"kgctl.chaos.{journal.scenario}"
    if journal.error:
        case = ET.Element("testcase", classname=prefix, name="setup")
        _failure(case, [], journal.error)
        cases.append(case)
    for step in journal.steps:
        case = ET.Element(
            "testcase", classname=f"{prefix}.steps", name=f"{step.index + 1}. {step.name}"
        )
        if step.finished_ms:
            case.set("time", f"{max(0, step.finished_ms - step.started_ms) / 1000:.3f}")
        mine = [v for v in journal.violations if v.step == step.name]
        if step.status == "skipped":
            ET.SubElement(case, "skipped", message="an earlier step did not settle")
        elif step.status != "ok" or mine:
            _failure(case, mine, f"step {step.status}")
        cases.append(case)
    for rule, state in sorted(journal.invariants.items()):
        case = ET.Element("testcase", classname=f"{prefix}.invariants", name=rule)
        if state != "held":
            _failure(case, [v for v in journal.violations if v.rule == rule], f"{rule} {state}")
        cases.append(case)
    suite.extend(cases)
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
    suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    suite.set("time", f"{max(duration, 0):.3f}")
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(journal: Journal, path: Path) -> None:
    try:
        path.write_text(junit_xml(journal), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--junit-xml {path}: cannot write it ({exc.strerror})") from None
