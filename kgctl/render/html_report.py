"""A `Report` as one self-contained HTML page: no scripts, fonts or images fetched.

Sections: summary, rebalances table, a timeline SVG (each member's partitions and phases
across generations, with the group's JoinGroup/SyncGroup/Stable phases on top), the
invariants, and every event. Pure: `render_html(report) -> str`.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from kgctl.model.events import Event
from kgctl.render.group_view import describe_event, fmt_clock, fmt_ms
from kgctl.render.member_lines import describe
from kgctl.render.report_text import cause_text, errors_text, is_guess, took_text, unassigned_text
from kgctl.report import MemberTimeline, Rebalance, Report

PHASE_COLOUR = {
    "JoinGroup": "#f2b134",
    "SyncGroup": "#e8702a",
    "Stable": "#4caf50",
    "unknown": "#c9c9c9",
    "left": "#9e9e9e",
    "failed": "#d32f2f",
}
NONE_COLOUR = "#f4c7c3"  # alive but owning nothing

WIDTH = 1200
LABEL_W = 150
PLOT_W = WIDTH - LABEL_W - 20
ROW_H = 38
TOP = 70  # axis + group phase band

CSS = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 24px;
       color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; }
.sub { color: #666; margin-bottom: 12px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 8px; text-align: left;
         vertical-align: top; }
th { background: #f5f5f5; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.guess { color: #a66b00; } .err { color: #c62828; } .ok { color: #2e7d32; }
.verdict { font-weight: bold; font-size: 15px; }
#events-table td { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
#events-table tr.observer td { background: #f4f8ff; }
#events-table tr.chaos td { background: #fff8e6; }
#events-table tr.error td { color: #c62828; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
            vertical-align: -2px; }
svg text { font-family: system-ui, sans-serif; }
"""


def render_html(report: Report) -> str:
    title = f"kgctl report: {report.group or 'group'}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        _summary(report),
        _rebalances(report),
        _timeline(report),
        _invariants(report),
        _events(report),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _summary(r: Report) -> str:
    start = fmt_clock(r.first_ms) if r.events else "-"
    text = (
        f"{len(r.events)} events from {start}, over {fmt_ms(r.last_ms - r.first_ms)}; "
        f"{len(r.members)} members; {len(r.rebalances)} rebalances"
    )
    if r.skipped:
        text += f"; {len(r.skipped)} input lines skipped (not events)"
    return f'<div class="sub" id="summary">{escape(text)}</div>'


def _rebalances(r: Report) -> str:
    rows = []
    for rb in r.rebalances:
        gen = f"{'+' if rb.inferred else ''}{rb.generation}"
        if rb.previous_generation is not None:
            gen = f"{rb.previous_generation} → {gen}"
        took = took_text(rb, r)
        moved = ", ".join(
            f"{m.topic}-{m.partition} {'/'.join(m.before) or '∅'}→{'/'.join(m.after)}"
            for m in rb.moves
        )
        rows.append(
            "<tr>"
            f'<td class="num">{rb.index}</td><td>{escape(gen)}</td>'
            f"<td>{escape(fmt_clock(rb.start_ms))}</td>"
            f'<td class="{"guess" if is_guess(rb) else ""}">{escape(cause_text(rb))}'
            f"{_why_html(rb)}</td>"
            f'<td class="num">{escape(took)}</td>'
            f'<td class="num">{escape(fmt_ms(rb.join_ms))} / '
            f"{escape(fmt_ms(rb.sync_phase_ms))}</td>"
            f"<td>{escape(unassigned_text(rb))}</td>"
            f'<td class="num" title="{escape(moved)}">{len(rb.moves)}</td>'
            f'<td class="{"err" if rb.errors else ""}">{escape(errors_text(rb))}</td>'
            "</tr>"
        )
    head = (
        "<tr><th>#</th><th>generation</th><th>started</th><th>cause</th><th>took</th>"
        "<th>JoinGroup / SyncGroup</th><th>without partitions</th><th>moved</th>"
        "<th>errors</th></tr>"
    )
    return (
        '<section id="rebalances"><h2>Rebalances</h2>'
        f'<table id="rebalances-table">{head}{"".join(rows)}</table></section>'
    )


def _why_html(rb: Rebalance) -> str:
    """The diagnosis under the short cause: evidence, what it waited for, advice."""
    d = rb.diagnosis
    if d is None:
        return f"<br><small>{escape(rb.evidence)}</small>"
    parts = [f"{d.trigger.confidence}: {d.trigger.evidence}"]
    parts += [w.text() for w in d.critical_path]
    parts += [
        f"advice: {a.shown()}: {a.text}" if a.value else f"advice: {a.text}" for a in d.advice
    ]
    parts += list(d.notes)
    return "".join(f'<br><small class="why">{escape(p)}</small>' for p in parts)


# -- timeline -----------------------------------------------------------------------------


LABEL_LANE_H = 12  # one line of generation labels
CHAR_W = 5.6  # px per character of a 10px label (a generous estimate)


def _label_lanes(starts: list[tuple[float, str]]) -> list[int]:
    """A lane (line) for each generation label, so that none overlaps the one before it
    in its lane: labels of rebalances close together go on separate lines."""
    ends: list[float] = []  # per lane, where its last label ends
    lanes = []
    for x, text in starts:
        width = len(text) * CHAR_W + 6
        for lane, end in enumerate(ends):
            if x >= end:
                ends[lane] = x + width
                lanes.append(lane)
                break
        else:
            ends.append(x + width)
            lanes.append(len(ends) - 1)
    return lanes


class _Scale:
    def __init__(self, first: int, last: int) -> None:
        self.first = first
        self.span = max(last - first, 1)

    def x(self, t: int) -> float:
        return LABEL_W + (t - self.first) / self.span * PLOT_W

    def w(self, a: int, b: int) -> float:
        return max(self.x(b) - self.x(a), 1.5)


def _tick_step(span_ms: int) -> int:
    for step in (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000,
                 120_000, 300_000, 600_000, 1_800_000, 3_600_000):  # fmt: skip
        if span_ms / step <= 12:
            return step
    return 7_200_000


def _timeline(r: Report) -> str:
    sc = _Scale(r.first_ms, r.last_ms)
    labels = [
        (sc.x(rb.start_ms) + 3, f"#{rb.index} gen {rb.generation}: {_label(rb)}")
        for rb in r.rebalances
    ]
    lanes = _label_lanes(labels)
    top = TOP + LABEL_LANE_H * max(max(lanes, default=0), 0)
    height = top + ROW_H * max(len(r.members), 1) + 30
    out: list[str] = [
        f'<svg id="timeline-svg" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="timeline of members, partitions and phases">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#fff"/>',
    ]
    # Axis: relative time.
    step = _tick_step(r.last_ms - r.first_ms)
    t = 0
    while r.first_ms + t <= r.last_ms:
        x = sc.x(r.first_ms + t)
        out.append(
            f'<line x1="{x:.1f}" y1="18" x2="{x:.1f}" y2="{height - 20}" stroke="#eee"/>'
            f'<text x="{x:.1f}" y="14" font-size="10" fill="#777" text-anchor="middle">'
            f"+{escape(fmt_ms(t))}</text>"
        )
        t += step
    # The group's phases per generation.
    out.append('<text x="8" y="42" font-size="12" font-weight="bold">group phases</text>')
    for (lx, text), lane, rb in zip(labels, lanes, r.rebalances, strict=True):
        spans = _group_spans(rb.start_ms, rb.sync_ms, rb.stable_ms, rb.end_ms, r.last_ms)
        for phase, a, b in spans:
            out.append(
                f'<rect class="phase {phase}" x="{sc.x(a):.1f}" y="28" width="{sc.w(a, b):.1f}"'
                f' height="18" fill="{PHASE_COLOUR[phase]}" opacity="0.85">'
                f"<title>generation {rb.generation}: {phase} {escape(fmt_ms(b - a))}</title>"
                "</rect>"
            )
        x = sc.x(rb.start_ms)
        out.append(
            f'<line x1="{x:.1f}" y1="26" x2="{x:.1f}" y2="{height - 20}" stroke="#b71c1c" '
            f'stroke-dasharray="3,3" stroke-width="1"/>'
            f'<text class="gen-label" x="{lx:.1f}" y="{60 + lane * LABEL_LANE_H}" '
            f'font-size="10" fill="#b71c1c">{escape(text)}</text>'
        )
    rows = {m.key: top + i * ROW_H for i, m in enumerate(r.members)}
    for i, m in enumerate(r.members):
        out.append(_member_row(m, sc, top + i * ROW_H))
    # The member each rebalance waited for: a red outline over the wait on its row.
    for rb in r.rebalances:
        d = rb.diagnosis
        for w in d.critical_path if d is not None else ():
            y = rows.get(w.member)
            if y is None:
                continue
            a = rb.start_ms - w.ms if w.phase == "detect" else rb.start_ms
            if w.phase == "sync" and rb.sync_ms is not None:
                a = rb.sync_ms
            b = a + w.ms
            out.append(
                f'<rect class="waited-for" data-member="{escape(w.member)}" '
                f'data-generation="{rb.generation}" x="{sc.x(a):.1f}" y="{y + 2}" '
                f'width="{sc.w(a, b):.1f}" height="{ROW_H - 8}" fill="none" '
                f'stroke="#d50000" stroke-width="2" stroke-dasharray="4,2">'
                f"<title>generation {rb.generation} waited {escape(fmt_ms(w.ms))} for "
                f"{escape(w.member)}: {escape(w.detail)}</title></rect>"
            )
    legend = "".join(
        f'<span><i style="background:{c}"></i>{escape(p)}</span>'
        for p, c in PHASE_COLOUR.items()
        if p not in ("left",)
    )
    legend += f'<span><i style="background:{NONE_COLOUR}"></i>owns no partitions</span>'
    legend += '<span><i style="background:#1e88e5"></i>owns partitions (label)</span>'
    out.append("</svg>")
    return (
        '<section id="timeline"><h2>Timeline</h2>'
        '<p class="sub">Each member: its phase (thin strip) and the partitions it owned '
        "(bar); dashed lines mark where each rebalance began; a red dashed box marks the "
        "member a rebalance waited for, over the wait.</p>"
        + "".join(out)
        + f'<div class="legend">{legend}</div></section>'
    )


def _label(rb: Rebalance) -> str:
    """A generation's label on the timeline: its trigger in a few words."""
    d = rb.diagnosis
    if d is not None and d.trigger.cause_known:
        t = d.trigger
        return (f"{t.who}: " if t.who else "") + t.cause_name.replace("_", " ")
    return cause_text(rb)


def _group_spans(
    start: int, sync: int | None, stable: int | None, end: int | None, last: int
) -> list[tuple[str, int, int]]:
    stop = end if end is not None else last
    spans: list[tuple[str, int, int]] = []
    join_end = sync if sync is not None else (stable if stable is not None else stop)
    spans.append(("JoinGroup", start, join_end))
    if sync is not None:
        spans.append(("SyncGroup", sync, stable if stable is not None else stop))
    if stable is not None:
        spans.append(("Stable", stable, stop))
    return spans


def _member_row(m: MemberTimeline, sc: _Scale, y: int) -> str:
    out = [f'<g class="member-row" data-member="{escape(m.key)}">']
    label = m.key if len(m.key) <= 20 else m.key[:19] + "…"
    out.append(
        f'<text x="8" y="{y + 22}" font-size="12" font-weight="bold">{escape(label)}'
        f"<title>{escape(', '.join(m.member_ids))}</title></text>"
    )
    for s in m.phases:
        colour = PHASE_COLOUR.get(s.label, "#c9c9c9")
        out.append(
            f'<rect class="phase" x="{sc.x(s.start_ms):.1f}" y="{y + 4}" '
            f'width="{sc.w(s.start_ms, s.end_ms):.1f}" height="6" fill="{colour}">'
            f"<title>{escape(m.key)}: {escape(s.label)} {escape(fmt_ms(s.end_ms - s.start_ms))}"
            "</title></rect>"
        )
    most = max((s.count for s in m.ownership), default=1) or 1
    for s in m.ownership:
        x, w = sc.x(s.start_ms), sc.w(s.start_ms, s.end_ms)
        if s.count == 0:
            fill, text = NONE_COLOUR, "none"
        else:
            fill, text = "#1e88e5", s.label
        opacity = 1.0 if s.count == 0 else 0.45 + 0.55 * s.count / most
        out.append(
            f'<rect class="owned" x="{x:.1f}" y="{y + 12}" width="{w:.1f}" height="20" '
            f'fill="{fill}" opacity="{opacity:.2f}" stroke="#fff" stroke-width="0.5">'
            f"<title>{escape(m.key)} owns {escape(s.label or 'nothing')} for "
            f"{escape(fmt_ms(s.end_ms - s.start_ms))}</title></rect>"
        )
        short = _short_partitions(text)
        if w >= len(short) * 6.2 + 6:
            colour = "#fff" if s.count else "#8a3b36"
            out.append(
                f'<text x="{x + 4:.1f}" y="{y + 26}" font-size="11" fill="{colour}">'
                f"{escape(short)}</text>"
            )
    if m.left_ms is not None:
        x = sc.x(m.left_ms)
        # Near the right edge the note goes left of the line, over the phase strip.
        anchor, tx, ty = ("end", x - 3, y + 2) if x > WIDTH - 260 else ("start", x + 3, y + 26)
        out.append(
            f'<text x="{tx:.1f}" y="{ty}" font-size="10" fill="#555" text-anchor="{anchor}">'
            f"✕ {escape(m.left_reason[:40])}</text>"
        )
    out.append("</g>")
    return "".join(out)


def _short_partitions(label: str) -> str:
    """`orders[0,1]` with long topic names cut: the partition ids matter most here."""
    if "[" not in label:
        return label
    parts = []
    for chunk in label.split(" "):
        topic, _, ids = chunk.partition("[")
        parts.append((topic if len(topic) <= 12 else "…" + topic[-6:]) + "[" + ids)
    return " ".join(parts)


# -- invariants ----------------------------------------------------------------------------


def _invariants(r: Report) -> str:
    bad = r.violations
    if bad:
        verdict = f'<p class="verdict err">{len(bad)} violation(s)</p>'
    else:
        verdict = f'<p class="verdict ok">All {len(r.checks)} checks passed.</p>'
    rows = []
    for c in r.checks:
        when = (
            "whole run"
            if c.rule == "exclusive-ownership" and not c.recorded
            else (f"generation {c.generation} stable" if c.generation is not None else "")
        )
        if c.recorded:
            when = "reported by chaos"
        detail = "; ".join(v.message for v in c.violations) or "ok"
        rows.append(
            f'<tr class="{"err" if c.violations else ""}"><td>{escape(c.rule)}</td>'
            f"<td>{escape(when)}</td><td>{escape(fmt_clock(c.at_ms))}</td>"
            f'<td class="{"err" if c.violations else "ok"}">{escape(detail)}</td></tr>'
        )
    return (
        '<section id="invariants"><h2>Invariants</h2>'
        '<p class="sub">No partition owned by two members at once (whole run); once each '
        "generation is stable, every partition has one live owner and every member is on "
        "the same generation.</p>"
        f'{verdict}<table id="invariants-table"><tr><th>rule</th><th>when</th><th>at</th>'
        f"<th>result</th></tr>{''.join(rows)}</table></section>"
    )


# -- events --------------------------------------------------------------------------------


def event_detail(ev: Event) -> str:
    """One line about an event, as the member and watch views word it."""
    if ev.source == "member":
        return describe(ev)
    if ev.source == "observer":
        return describe_event(ev)
    return _short_json(ev.data)


def _short_json(data: Any, limit: int = 300) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _events(r: Report) -> str:
    rows = []
    for ev in r.events:
        error = str(ev.data.get("error", "") or "")
        failed = (error and error not in ("NONE",)) or ev.type in (
            "InvariantViolated",
            "MemberFailed",
        )
        cls = f"{ev.source}{' error' if failed else ''}"
        rows.append(
            f'<tr class="{escape(cls)}">'
            f'<td class="num">+{escape(fmt_ms(ev.ts_ms - r.first_ms))}</td>'
            f"<td>{escape(fmt_clock(ev.ts_ms))}</td><td>{escape(ev.source)}</td>"
            f"<td>{escape(ev.member or ev.member_id)}</td>"
            f'<td class="num">{ev.generation if ev.generation >= 0 else ""}</td>'
            f"<td>{escape(ev.type)}</td><td>{escape(event_detail(ev))}</td></tr>"
        )
    head = (
        "<tr><th>+</th><th>time</th><th>source</th><th>member</th><th>gen</th><th>event</th>"
        "<th>detail</th></tr>"
    )
    return (
        f'<section id="events"><h2>Events ({len(r.events)})</h2>'
        f'<table id="events-table">{head}{"".join(rows)}</table></section>'
    )
