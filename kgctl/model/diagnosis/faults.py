"""Rebalances that `kgctl proxy` caused: an error its fault rules injected into a member's
request (its `FaultInjected`, source `wire`), of the kind that makes a member join again,
is the trigger of the rebalance that follows it, not the member that obeyed it."""

from __future__ import annotations

from collections.abc import Sequence

from kgctl.model.diagnosis.types import EXACT, Diagnosis, Trigger
from kgctl.model.event_index import EventIndex
from kgctl.model.kafka_errors import FENCES_MEMBER, NORMAL_ANSWERS, REJOINS_AT_ONCE
from kgctl.model.reasons import Cause
from kgctl.model.timeline import utc_clock as clock

# An answer with one of these sends a member back to JoinGroup (a classic member told
# REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID) or to a join with epoch
# 0 (a consumer-protocol member fenced): the group rebalances because of the answer. An
# error the member retries where it is (NOT_COORDINATOR, a delay) starts nothing itself.
_REJOINING = (REJOINS_AT_ONCE | FENCES_MEMBER) - NORMAL_ANSWERS


INJECTED = "kgctl proxy injected "  # the reason of a trigger that names a fault


def is_injected(t: Trigger) -> bool:
    """Whether `t` is a fault the proxy injected: its own words say why, exactly."""
    return t.reason.startswith(INJECTED)


def injected_faults(events: EventIndex, since: int, until: int) -> list[Trigger]:
    """The proxy's injected errors in (since, until] that make a member join again, each
    a trigger naming the fault (and no member: the member did as it was told)."""
    out: list[Trigger] = []
    for e in events.of("FaultInjected", since=since, until=until):
        error = str(e.data.get("error") or "")
        if e.source != "wire" or e.data.get("effect") != "error" or error not in _REJOINING:
            continue
        who = e.member or e.client_id or e.member_id or "a member"
        api = str(e.data.get("api") or "request")
        rule = str(e.data.get("text") or e.data.get("rule") or "")
        out.append(
            Trigger(
                cause=Cause.REJOIN_REQUESTED,
                who="",
                reason=f"{INJECTED}{error}",
                confidence=EXACT,
                evidence=f"wire: kgctl proxy answered {who}'s {api} with an injected {error} "
                f"(fault rule {rule}); a member answered so joins the group again",
                at_ms=e.ts_ms,
            )
        )
    return out


# How long after an injected error a rebalance it caused would have begun: the member
# answered so joins again at once (a told classic member at its next poll).
FOLLOW_MS = 5000


def unfollowed_faults(events: EventIndex, diagnoses: Sequence[Diagnosis]) -> list[str]:
    """A note for each injected error no rebalance followed: the proxy answered it
    itself, so the broker never heard of it (a consumer-protocol member "fenced" so comes
    back at the same group epoch with its partitions)."""
    out: list[str] = []
    for t in injected_faults(events, -1, 1 << 62):
        near = any(
            t.at_ms - 100 <= d.start_ms <= t.at_ms + FOLLOW_MS
            or d.start_ms <= t.at_ms <= (d.stable_ms or d.start_ms)
            for d in diagnoses
        )
        if not near:
            said = t.evidence.removeprefix("wire: ").split("; ", 1)[0]
            out.append(
                f"at {clock(t.at_ms)} {said}, and no rebalance began within "
                f"{FOLLOW_MS // 1000}s: the proxy answered it itself, the broker never "
                "heard of the request"
            )
    return out
