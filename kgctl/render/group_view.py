"""Pure views of a group state: `render_group(state, now_ms, width, height)` and the list.

No I/O and no clock: the caller passes `now_ms` and the screen size. The view budgets
its rows so it fits the screen: at 80x24 it keeps the header, the members, the latest
generations and a few log lines; at 160x50 it adds member ids, hosts, instance ids,
phase timings and a longer log.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from kgctl.model.diagnosis import Diagnosis, diagnose
from kgctl.model.events import Event
from kgctl.model.reasons import cause_text
from kgctl.model.snapshot import GroupListing
from kgctl.model.state import (
    GenerationRecord,
    GroupState,
    MemberState,
    format_owned,
    lives_changed_at,
)
from kgctl.model.timeline import rebalance_unassigned, unassigned_basis
from kgctl.render.grid import Grid
from kgctl.render.member_lines import CONSUMER_MEMBER_EVENTS, target_gap
from kgctl.render.member_lines import describe as describe_member
from kgctl.render.proxy_lines import describe_wire
from kgctl.render.proxy_lines import shown as wire_shown


class FrameMemo:
    """What a live view's next frame may reuse from the last: the time without partitions
    of each generation whose rebalance is over.

    It is computed from who owned which partition when and when each member was alive,
    and cost a frame of 1,000 members and 10,000 partitions about 10 ms per generation
    (docs/benchmarks.md, "The live watch at 1,000 members"). A finished rebalance's window
    is in the past: what the fold changes afterwards (a running rebalance's assignments,
    stamped at their events' times) does not touch it. So each finished generation's
    numbers are kept until a change reaches back into its window (a late event); only a
    running rebalance's numbers, which grow with the clock, are computed every frame.
    """

    def __init__(self) -> None:
        self._seen: GroupState | None = None  # the state the kept numbers were read from
        self._closed: dict[tuple[int, int, int], dict[str, int]] = {}

    def unassigned(self, s: GroupState, g: GenerationRecord, now_ms: int) -> dict[str, int]:
        if g.stable_ms is None and g.end_ms is None:
            return rebalance_unassigned(s, g, now_ms)
        self._forget_changed(s)
        t0, t1 = g.rebalance_window(now_ms)
        key = (g.generation, t0, t1)
        found = self._closed.get(key)
        if found is None:
            found = self._closed[key] = rebalance_unassigned(s, g, now_ms)
        return found

    def _forget_changed(self, s: GroupState) -> None:
        """Drop the generations whose window a change since the last frame reaches into.
        When `s` is the one batch of events after the state last read, the fold's own
        account of that batch says where its changes begin (`GroupState.batch_edits`);
        otherwise both states' spans and lives are compared (at 1,000 members and
        10,000 partitions, a few milliseconds a frame while a rebalance runs)."""
        seen = self._seen
        if s is seen:
            return
        self._seen = s
        if seen is None:
            self._closed = {}
            return
        edits = s.batch_edits
        if edits is not None and edits[0] == seen.events_folded:
            since = edits[1]
        else:
            since = _first_change_between(seen, s)
        # A change at instant t alters a window [t0, t1] only when t < t1.
        self._closed = {k: v for k, v in self._closed.items() if k[2] <= since}


def _first_change_between(old: GroupState, new: GroupState) -> float:
    """The earliest instant at which two states' ownership spans or members' lives
    differ (inf: nowhere)."""
    old_owned, owned = old.ownership, new.ownership
    old_lives = {k: m.lives for k, m in old.members.items()}
    lives = {k: m.lives for k, m in new.members.items()}
    if owned is old_owned and lives == old_lives:
        return math.inf
    # (identity first: of 10,000 partitions a frame's events change a few hundred)
    changed = [(tp, spans) for tp, spans in owned.items() if old_owned.get(tp) is not spans]
    since = _first_change(
        ((old_owned.get(tp, ()), spans) for tp, spans in changed),
        len(old_owned) > len(owned),
        lambda sp: ((sp.member, sp.generation, sp.start_ms), sp.start_ms, sp.end_ms),
    )
    if any(k not in lives for k in old_lives):
        return -math.inf
    changed_lives = (
        lives_changed_at(old_lives.get(k, ()), mine)
        for k, mine in lives.items()
        if old_lives.get(k) is not mine
    )
    return min(since, min(changed_lives, default=math.inf))


def _first_change(
    pairs: Iterable[tuple[tuple[Any, ...], tuple[Any, ...]]],
    removed: bool,
    split: Callable[[Any], tuple[Hashable, int, int | None]],
) -> float:
    """The earliest instant at which any (old, new) pair of span tuples differ: a span
    added or gone at its start, a span's end moved at the earlier end. -inf when something
    was removed, or a tuple holds two spans `split` does not tell apart."""
    if removed:
        return -math.inf
    first = math.inf
    for old, new in pairs:
        if old is new:
            continue
        quick = _added_or_ended(old, new, split)
        if quick is not None:
            first = min(first, quick)
            continue
        before = {key: (start, end) for key, start, end in map(split, old)}
        after = {key: (start, end) for key, start, end in map(split, new)}
        if len(before) != len(old) or len(after) != len(new):
            return -math.inf
        for key in before.keys() | after.keys():
            if key not in before or key not in after:
                first = min(first, (before.get(key) or after[key])[0])
            elif before[key] != after[key]:
                ends = [e for e in (before[key][1], after[key][1]) if e is not None]
                first = min(first, min(ends))
    return first


def _added_or_ended(
    old: tuple[Any, ...],
    new: tuple[Any, ...],
    split: Callable[[Any], tuple[Hashable, int, int | None]],
) -> float | None:
    """`_first_change` of one pair, read by position, for the two changes the fold makes
    (while a rebalance runs, thousands a frame): spans added after the same ones (the
    history differs from the first added one's start), or the last one's end set (from
    the earlier of its two ends). None for any other change. Where the full reading
    cannot match two spans `split` does not tell apart, it answers -inf; the positions
    say exactly which span changed."""
    n = len(old)
    if len(new) > n and all(a is b for a, b in zip(old, new, strict=False)):
        return min(split(x)[1] for x in new[n:])
    if n and len(new) == n and all(a is b for a, b in zip(old[:-1], new, strict=False)):
        (k0, s0, e0), (k1, s1, e1) = split(old[-1]), split(new[-1])
        if k0 != k1 or s0 != s1:
            return None
        if e0 == e1:
            return math.inf
        return min(e for e in (e0, e1) if e is not None)
    return None


STATE_STYLE = {
    "Stable": "bold green",
    "PreparingRebalance": "bold yellow",
    "CompletingRebalance": "bold yellow",
    "Assigning": "bold yellow",
    "Reconciling": "bold yellow",
    "Empty": "dim",
    "Dead": "bold red",
}


def fmt_ms(ms: int | None) -> str:
    """850ms, 3.2s, 2m05s, 1h02m; '-' when unknown."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    if ms < 3_600_000:
        return f"{ms // 60_000}m{(ms // 1000) % 60:02d}s"
    return f"{ms // 3_600_000}h{(ms // 60_000) % 60:02d}m"


def fmt_clock(ts_ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts_ms / 1000)) + f".{ts_ms % 1000:03d}"


# -- header -----------------------------------------------------------------------------


def _consumer_protocol(s: GroupState) -> bool:
    """A KIP-848 group: epochs instead of generations, and no leader. The broker says so
    (ConsumerGroupDescribe; DescribeGroups says classic: a mixed group back to classic
    is one again), else the live members do (kgctl consumer-protocol members)."""
    if s.group_type:
        return s.group_type == "consumer"
    return any(m.alive and m.protocol == "consumer" for m in s.members.values())


def _generation_text(s: GroupState) -> str:
    if _consumer_protocol(s):
        if s.group_epoch < 0 and s.generation >= 0:
            return f"{s.generation} (the members' highest epoch)"
        text = f"{s.group_epoch}" if s.group_epoch >= 0 else "?"
        if s.assignment_epoch >= 0 and s.assignment_epoch != s.group_epoch:
            text += f" (assignment epoch {s.assignment_epoch}: assigning)"
        elif s.assignment_epoch >= 0:
            text += f"  assignment epoch {s.assignment_epoch}"
        return text
    if s.generation < 0:
        return "? (no rebalance seen yet)"
    if s.generation_inferred:
        return f"+{s.generation} since watch start (inferred)"
    return str(s.generation)


def render_header(s: GroupState, now_ms: int, paused: bool = False) -> RenderableType:
    title = Text.assemble(("group ", "dim"), (s.group, "bold"), "  ")
    if not s.connected:
        # First: everything below is as of the last successful poll.
        down = now_ms - (s.disconnected_since_ms or now_ms)
        title.append(f"disconnected, retrying ({fmt_ms(down)})  ", "bold red")
    if s.missing:
        title.append("missing: no such group yet (waiting)", "bold red")
    else:
        title.append(s.state, STATE_STYLE.get(s.state, "bold"))
        if s.rebalancing:
            title.append("  rebalancing", "yellow")
    if paused:
        title.append("  [paused]", "reverse")
    live = s.live_members
    kip848 = _consumer_protocol(s)
    line1 = Text.assemble(
        ("protocol ", "dim"),
        _protocol_text(s, kip848),
        ("  assignor ", "dim"),
        s.protocol or "-",
        ("  group epoch " if kip848 else "  generation ", "dim"),
        _generation_text(s),
    )
    reconciling = sum(1 for m in live if m.reconciling)
    line2 = Text.assemble(
        ("reconciling ", "dim") if kip848 else ("leader ", "dim"),
        (f"{reconciling} of {len(live)}", "yellow" if reconciling else "")
        if kip848
        else s.leader or "- (DescribeGroups does not say)",
        ("  coordinator ", "dim"),
        s.coordinator or "-",
        ("  members ", "dim"),
        str(len(live)),
        ("  lag ", "dim"),
        "-" if s.total_lag is None else f"{s.total_lag:,}",
    )
    for line in (title, line1, line2):
        line.no_wrap = True
        line.overflow = "ellipsis"
    return Group(title, line1, line2)


def _protocol_text(s: GroupState, kip848: bool) -> str:
    # DescribeGroups names a classic consumer group's protocol type "consumer", which
    # read as the new consumer protocol (KIP-848) next to it: say which protocol first.
    if kip848:
        return "consumer (KIP-848)"
    if s.protocol_type in ("", "consumer"):
        return "classic" if s.protocol_type else "-"
    return f"classic ({s.protocol_type})"  # a Connect or Streams group


# -- members ----------------------------------------------------------------------------


def _table(title: str) -> Grid:
    """The view's table look: a bold title on the left, a ruled header, no edges."""
    return Grid(title)


def render_members(s: GroupState, now_ms: int, width: int, rows: int) -> RenderableType:
    wide = width >= 120
    t = _table(f"Members ({len(s.live_members)} live)")
    t.add_column("member", overflow="ellipsis", max_width=28 if wide else 16)
    if wide:
        t.add_column("member id", overflow="ellipsis", max_width=24)
        t.add_column("host", overflow="ellipsis", max_width=18)
        t.add_column("instance", overflow="ellipsis", max_width=14)
    t.add_column("partitions", overflow="ellipsis", ratio=1)
    kip848 = _consumer_protocol(s)
    if kip848:
        # What each member still has to take (+) or give up (-) to reach its target.
        t.add_column("target gap", overflow="ellipsis", ratio=1)
        t.add_column("proto", min_width=5)
    t.add_column("phase", min_width=9)
    t.add_column("epoch" if kip848 else "gen", justify="right", min_width=3)
    t.add_column("lag", justify="right", min_width=3)
    t.add_column("seen", justify="right", min_width=5)
    members = sorted(s.members.values(), key=lambda m: (not m.alive, m.name))
    shown = members[: max(rows, 0)]
    for m in shown:
        t.add_row(*_member_row(m, now_ms, wide, kip848), style=None if m.alive else "dim")
    if len(members) > len(shown):
        t.add_row(f"… {len(members) - len(shown)} more", *[""] * (len(t.columns) - 1))
    if not members:
        t.add_row("(no members)", *[""] * (len(t.columns) - 1))
    return t


def _member_row(m: MemberState, now_ms: int, wide: bool, kip848: bool = False) -> list[str]:
    if not m.alive:
        parts = f"gone: {m.left_reason}" if m.left_reason else "gone"
    elif m.partitions:
        parts = format_owned(m.partitions)
    else:
        since = m.unassigned_since_ms
        # Seen by the observer only, and empty-handed from its first sight: it may have
        # been so long before (the watch began, or the member appeared, then).
        unseen_before = since is not None and since <= m.first_seen_ms and "member" not in m.sources
        at_least = "≥" if unseen_before else ""
        parts = "none" + (f" for {at_least}{fmt_ms(now_ms - since)}" if since is not None else "")
    row = [m.name]
    if wide:
        row += [m.member_id or "-", m.host.lstrip("/") or "-", m.instance_id or "-"]
    row.append(parts)
    if kip848:
        # The target only matters while it differs from what the member owns.
        if m.target is None or not m.alive:
            row.append("-")
        elif m.reconciling:
            gap = target_gap(m.partitions, m.target)
            row.append(f"{gap} → {format_owned(m.target) or 'none'}" if wide else gap)
        else:
            row.append("= partitions")
        row.append(m.protocol or "?")
    generation = m.epoch if kip848 and m.epoch >= 0 else m.generation
    phase = m.member_state.lower() if m.member_state and m.alive else m.phase
    row += [
        phase,
        "-" if generation < 0 else str(generation),
        "-" if m.lag is None else f"{m.lag:,}",
        fmt_ms(now_ms - m.last_seen_ms),
    ]
    return row


# -- generations ------------------------------------------------------------------------


def render_generations(
    s: GroupState,
    now_ms: int,
    width: int,
    rows: int,
    diagnoses: Mapping[int, Diagnosis] | None = None,
    memo: FrameMemo | None = None,
) -> RenderableType:
    """One row a generation; its cause is the diagnosis's trigger and critical path in
    short form when there is one (`kgctl explain GROUP` gives the full text)."""
    wide = width >= 120
    kip848 = _consumer_protocol(s)
    t = _table("Group epochs" if kip848 else "Generations")
    t.add_column("epoch" if kip848 else "gen", justify="right", min_width=3)
    t.add_column("started", min_width=8)
    t.add_column("cause", overflow="ellipsis", ratio=3)
    if wide:
        # Consumer groups: until the target assignment, then until members reconciled.
        t.add_column("assign" if kip848 else "join", justify="right")
        t.add_column("reconcile" if kip848 else "sync", justify="right")
    t.add_column("to stable", justify="right", min_width=9)
    t.add_column("lasted", justify="right", min_width=7)
    t.add_column("no partitions", overflow="ellipsis", ratio=1)
    gens = list(s.generations)[-max(rows, 0) :] if rows > 0 else []
    for g in reversed(gens):
        d = (diagnoses or {}).get(g.generation) if not g.inferred else None
        t.add_row(*_generation_row(s, g, now_ms, wide, d, memo))
    if not s.generations:
        t.add_row(
            "-", "-", "no rebalance seen since the watch started", *[""] * (len(t.columns) - 3)
        )
    return t


def _generation_row(
    s: GroupState,
    g: GenerationRecord,
    now_ms: int,
    wide: bool,
    d: Diagnosis | None = None,
    memo: FrameMemo | None = None,
) -> list[str]:
    unassigned = (
        memo.unassigned(s, g, now_ms) if memo is not None else rebalance_unassigned(s, g, now_ms)
    )
    if d is not None and d.trigger.cause_known:
        cause = d.short(reasons=wide)
        if wide and d.advice:
            a = d.advice[0]
            cause += f"; advice: {a.shown()}"
    else:
        cause = cause_text(g.cause) or "-"
        if g.cause and g.cause_guess:
            cause += " (guess)"
        if g.evidence and wide:
            cause += f": {g.evidence}"
    label = f"+{g.generation}" if g.inferred else str(g.generation)
    row = [label, fmt_clock(g.start_ms)[:8], cause]
    if wide:
        join_end = g.sync_ms if g.sync_ms is not None else g.stable_ms
        row += [
            fmt_ms(None if join_end is None or not g.start_exact else join_end - g.start_ms),
            fmt_ms(None if g.sync_ms is None or g.stable_ms is None else g.stable_ms - g.sync_ms),
        ]
    row += [
        _to_stable(g),
        fmt_ms(g.duration_ms(now_ms)) + ("" if g.end_ms is not None else "…"),
        _unassigned_cell(s, unassigned),
    ]
    return row


def _to_stable(g: GenerationRecord) -> str:
    if g.stable_ms is not None:
        # (a start known only as the join's end: the rebalance took at least this)
        return ("" if g.start_exact else "≥") + fmt_ms(g.rebalance_ms())
    # Another rebalance began before this one was stable: it never will be.
    return "not yet" if g.end_ms is None else "superseded"


# Members a generation's "no partitions" cell names; past that, the longest ones and a
# count (a cell of 1,000 names shows its first few anyway, and cost most of a frame).
UNASSIGNED_NAMED = 3


def _unassigned_cell(s: GroupState, unassigned: Mapping[str, int]) -> str:
    if not unassigned:
        return "-"
    items = list(unassigned.items())
    if len(items) > UNASSIGNED_NAMED:
        items = sorted(items, key=lambda kv: -kv[1])[:UNASSIGNED_NAMED]
    # ≥: a member seen on the wire only was told its partitions then; its application
    # took them up later (the explain's cost line says so in words).
    named = ", ".join(
        f"{_name(s, k)} {'≥' if unassigned_basis(s, k) == 'wire' else ''}{fmt_ms(v)}"
        for k, v in items
    )
    more = len(unassigned) - len(items)
    return f"{named} +{more} more" if more else named


def _name(s: GroupState, key: str) -> str:
    """A member as the members table names it (an untraced one by its client id)."""
    m = s.members.get(key)
    return m.name if m is not None else key


# -- event log --------------------------------------------------------------------------


def _generation_line(ev: Event) -> str:
    d = ev.data
    if ev.type == "GenerationChanged":
        if "group_epoch" in d:
            was = d.get("previous")
            return f"group epoch {ev.generation}" + (f" (was {was})" if was is not None else "")
        sign = "+" if d.get("inferred") else ""
        return f"generation {sign}{ev.generation}"
    if d.get("source") == "inferred":
        return f"generation ids inferred, counted from the watch start: {d.get('reason', '')}"
    found = "" if d.get("found") else " (none stored yet)"
    return f"generation ids from the broker: {d.get('source')}[{d.get('partition')}]{found}"


def describe_event(ev: Event) -> str:
    """One short human line for an event."""
    d = ev.data
    who = ev.member or ev.client_id or ev.member_id
    if ev.type == "GroupStateChanged":
        return f"state {d.get('from', '?')} → {d.get('to', '?')}"
    if ev.type == "MemberJoinedGroup":
        return f"{who}@{ev.host.lstrip('/')} joined ({ev.member_id})"
    if ev.type == "MemberLeftGroup":
        return f"{who} left: {d.get('reason', '')}"
    if ev.type in ("GenerationChanged", "GenerationSourceChanged"):
        return _generation_line(ev)
    if ev.type == "RebalanceAttributed":
        guess = " (guess)" if d.get("guess") else ""
        cause = cause_text(str(d.get("cause", "")))
        return f"cause: {cause}{guess}: {d.get('evidence', '')}"
    if ev.type == "PartitionsMoved":
        moves = d.get("moves") or []
        shown = ", ".join(
            f"{m.get('topic')}-{m.get('partition')} {m.get('from_client') or '∅'}→"
            f"{m.get('to_client') or '∅'}"
            for m in moves[:4]
            if isinstance(m, dict)
        )
        more = f" +{len(moves) - 4}" if len(moves) > 4 else ""
        return f"{len(moves)} partitions moved: {shown}{more}"
    if ev.type == "GroupObserved":
        if d.get("missing"):  # the broker calls a group it does not know Dead
            return "snapshot: no such group (yet)"
        return f"snapshot: {d.get('state', '?')}, {len(d.get('members') or [])} members"
    if ev.type == "BrokerDisconnected":
        return f"broker unreachable, retrying: {d.get('error', '')}"
    if ev.type == "BrokerReconnected":
        return f"broker reachable again after {fmt_ms(int(d.get('down_ms', 0) or 0))}"
    if ev.source == "wire":
        return describe_wire(ev)
    if ev.type in CONSUMER_MEMBER_EVENTS:
        # A consumer-protocol member's steps: its own words, with its epoch.
        return f"{who} {ev.type}: {describe_member(ev)}"
    extra = {k: v for k, v in d.items() if k in ("partitions", "reason", "error", "leader")}
    text = f"{who} {ev.type}"
    if ev.generation >= 0:
        text += f" gen {ev.generation}"
    if extra:
        text += " " + json.dumps(extra, separators=(",", ":"))
    return text


def render_log(
    events: Sequence[Event], width: int, rows: int, scroll: int = 0, commits: bool = True
) -> RenderableType:
    """The newest events last, one line each, as many as `rows` allows; `scroll` lines
    back from the newest (the arrow keys of the live view); a proxy's successful commits
    only with `commits`."""
    shown = [
        e
        for e in events
        if not (e.type == "GroupObserved" and not e.data.get("changed"))
        # A proxy's answered heartbeats (classic or KIP-848) that changed nothing: every
        # few seconds per member, news only when failed; the proxy's text hides them too.
        and (e.source != "wire" or wire_shown(e, commits=commits))
    ]
    scroll = max(0, min(scroll, len(shown) - rows)) if rows > 0 else 0
    end = len(shown) - scroll
    shown = shown[max(end - rows, 0) : end] if rows > 0 else []
    title = "Events" if scroll == 0 else f"Events ({scroll} back; down arrow for newer)"
    lines = [Text(title, style="bold")]
    for ev in shown:
        line = Text.assemble(
            (fmt_clock(ev.ts_ms), "dim"), " ", (ev.source[:3], "cyan"), " ", describe_event(ev)
        )
        line.no_wrap = True
        line.overflow = "ellipsis"
        lines.append(line)
    if not shown:
        lines.append(Text("(no events yet)", style="dim"))
    return Group(*lines)


# -- the whole screen -------------------------------------------------------------------


def diagnoses_of(s: GroupState, now_ms: int) -> dict[int, Diagnosis]:
    """The diagnosis of each generation, from the events the state still holds."""
    return {d.generation: d for d in diagnose(s, s.recent, now_ms)}


def render_group(
    s: GroupState,
    now_ms: int,
    width: int = 80,
    height: int = 24,
    paused: bool = False,
    scroll: int = 0,
    diagnoses: Mapping[int, Diagnosis] | None = None,
    memo: FrameMemo | None = None,
    commits: bool = True,
) -> RenderableType:
    """Header, members, generations and the event log, sized to fit width x height (each
    generation's diagnosis from `diagnoses`, else from the events the state holds; a live
    loop passes the same `memo` every frame; a proxy's successful commits in the log only
    with `commits`)."""
    budget = max(height - 1, 12)  # keep the last line free (the cursor, the key hint)
    header_rows = 4  # three lines and a blank
    # Each table costs a title, a header and a rule besides its rows, and a blank line.
    members_rows = min(max(len(s.members), 1), max(2, (budget - header_rows) // 3))
    gen_rows = min(max(len(s.generations), 1), 3 if height < 40 else 8)
    used = header_rows + (members_rows + 4) + (gen_rows + 4) + 1
    log_rows = max(budget - used, 2)
    return Group(
        render_header(s, now_ms, paused),
        Text(""),
        render_members(s, now_ms, width, members_rows),
        render_generations(
            s,
            now_ms,
            width,
            gen_rows,
            diagnoses if diagnoses is not None else diagnoses_of(s, now_ms),
            memo,
        ),
        render_log(s.recent, width, log_rows, scroll, commits),
    )


def render_group_list(groups: Sequence[GroupListing]) -> RenderableType:
    t = _table(f"{len(groups)} groups")
    t.add_column("group", overflow="ellipsis")
    t.add_column("state")
    t.add_column("type")
    t.add_column("members", justify="right")
    for g in groups:
        t.add_row(
            g.group,
            Text(g.state, STATE_STYLE.get(g.state, "")),
            g.group_type or g.protocol_type or "-",
            "-" if g.members is None else str(g.members),
        )
    if not groups:
        t.add_row("(no groups)", "", "", "")
    return t
