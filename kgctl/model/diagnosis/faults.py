"""Rebalances that `kgctl proxy` caused: an error its fault rules injected into a member's
request (its `FaultInjected`, source `wire`), of the kind that makes a member join again,
is the trigger of the rebalance that follows it, not the member that obeyed it."""

from __future__ import annotations

from kgctl.model.diagnosis.types import EXACT, Trigger
from kgctl.model.event_index import EventIndex
from kgctl.model.kafka_errors import FENCES_MEMBER, NORMAL_ANSWERS, REJOINS_AT_ONCE
from kgctl.model.reasons import Cause

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
