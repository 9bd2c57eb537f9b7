"""The broker's own reasons for each rebalance, read from its log (pure: lines in).

A Kafka coordinator logs one line when it moves a group to PreparingRebalance:

    [2026-11-30 09:01:17,791] INFO [GroupCoordinator id=1 ...] Preparing to rebalance
    group G in state PreparingRebalance with old generation 2 (reason: Leader M
    re-joining group during Stable; client reason: cached metadata has changed). (logger)

The reason holds the broker's words and, since KIP-800, the client's own (`client
reason:`). The timestamp is the log's local time; kgctl reads it as UTC (the local
broker's log, and most servers', are written in UTC).
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterable

from kgctl.model.diagnosis import FAILED, LEFT, PARTITION_ADDED, UPGRADE_REFUSED, BrokerReason
from kgctl.model.timeline import utc_clock

_LINE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[,.](?P<ms>\d{3})\].*?"
    r"Preparing to rebalance group (?P<group>\S+) in state \S+ with old generation "
    r"(?P<gen>-?\d+)(?: \(__consumer_offsets-\d+\))? \(reason: (?P<rest>.*)$"
)
_FAILED = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[,.](?P<ms>\d{3})\].*?"
    r"Member (?P<member>\S+) in group (?P<group>\S+) has failed, removing it from the group"
)
# Kafka 4's coordinator: a classic member's leave, with the client's reason (its
# `Preparing to rebalance` line names the member, not the reason).
_LEFT = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[,.](?P<ms>\d{3})\].*?"
    r"\[Group (?P<group>\S+)\] Member (?P<member>\S+) has left group through explicit "
    r"`LeaveGroup` request; client reason: (?P<reason>.*?)"
    r"\s*(?:\((?:org\.apache|kafka)\.[\w.$]+\))?\s*$"
)
# Kafka 4's coordinator: a consumer-protocol member removed when its session expired.
_EXPIRED = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[,.](?P<ms>\d{3})\].*?"
    r"\[GroupId (?P<group>\S+)\] Member (?P<member>\S+) fenced from the group because "
    r"the member session expired"
)
# The controller (KRaft) replaying a new partition: a topic created, or grown.
_NEW_PARTITION = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[,.](?P<ms>\d{3})\].*?"
    r"Replayed PartitionRecord for new partition (?P<topic>\S+)-(?P<partition>\d+) with"
)
# Kafka 4's coordinator refusing the online upgrade of a classic group, when a member on
# the consumer protocol joins it (that member is answered GROUP_ID_NOT_FOUND).
_NO_UPGRADE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[,.](?P<ms>\d{3})\].*?"
    r"Cannot upgrade classic group (?P<group>\S+) to consumer group: (?P<reason>.*?)"
    r"\.?\s*(?:\((?:org\.apache|kafka)\.[\w.$]+\))?\s*$"
)
# A topic's partitions replayed within this long of its partition 0 were made with it.
CREATED_WITH_MS = 5_000
_LOGGER = re.compile(r"\s+\((?:org\.apache|kafka)\.[\w.$]+\)\s*$")


def _ts(m: re.Match[str]) -> int:
    parsed = time.strptime(m["ts"].replace("T", " "), "%Y-%m-%d %H:%M:%S")
    return calendar.timegm(parsed) * 1000 + int(m["ms"])


def parse_broker_log(lines: Iterable[str], group: str | None = None) -> list[BrokerReason]:
    """Every `Preparing to rebalance` line (of `group`, if given), every line of a member
    removed when its session expired (`Member M in group G has failed, removing it`; a
    consumer-protocol member `fenced … because the member session expired`) and every
    leave with its client's reason, every refused upgrade to a consumer group, in file
    order; and, of no group, every partition a
    topic gained after it was made (the controller's `new partition` of a topic whose
    partition 0 was not made just before it: a growth)."""
    out = []
    created: dict[str, int] = {}  # topic -> when the log saw its partition 0 made
    for line in lines:
        if "for new partition" in line:
            p = _NEW_PARTITION.match(line)
            if p is None:
                continue
            at = _ts(p)
            if p["partition"] == "0":
                created[p["topic"]] = at
            elif at - created.get(p["topic"], at - CREATED_WITH_MS - 1) > CREATED_WITH_MS:
                tp = f"{p['topic']}-{p['partition']}"
                out.append(BrokerReason(at, "", f"new partition {tp}", kind=PARTITION_ADDED))
            continue
        if "Cannot upgrade classic group" in line:
            u = _NO_UPGRADE.match(line.rstrip("\n"))
            if u is not None and (group is None or u["group"] == group):
                out.append(BrokerReason(_ts(u), u["group"], u["reason"], kind=UPGRADE_REFUSED))
            continue
        expired = _FAILED if "has failed, removing it" in line else None
        if expired is None and "because the member session expired" in line:
            expired = _EXPIRED
        if expired is not None:
            f = expired.match(line)
            if f is not None and (group is None or f["group"] == group):
                reason = f"member {f['member']} has failed (session timeout), removed"
                out.append(BrokerReason(_ts(f), f["group"], reason, kind=FAILED))
            continue
        if "has left group through explicit" in line:
            left = _LEFT.match(line.rstrip("\n"))
            if left is not None and (group is None or left["group"] == group):
                said = left["reason"].rstrip(".") if left["reason"] else "not provided"
                reason = f"member {left['member']} left (LeaveGroup); client reason: {said}"
                out.append(BrokerReason(_ts(left), left["group"], reason, kind=LEFT))
            continue
        if "Preparing to rebalance" not in line:
            continue
        m = _LINE.match(line.rstrip("\n"))
        if m is None or (group is not None and m["group"] != group):
            continue
        rest = _LOGGER.sub("", m["rest"]).rstrip()
        rest = rest.removesuffix(".").removesuffix(")").removesuffix(".")
        out.append(BrokerReason(_ts(m), m["group"], rest, int(m["gen"])))
    return out


def refused_upgrade_note(br: BrokerReason) -> str:
    """What explain says of a refused upgrade (an UPGRADE_REFUSED line): the broker's
    words, and what they mean for the group."""
    return (
        f"broker log {utc_clock(br.ts_ms)}: the broker would not make this classic group "
        f"a consumer group ({br.reason}); the member that joined on the consumer "
        "protocol was answered GROUP_ID_NOT_FOUND (librdkafka gives up on it: a fatal "
        "error) and the group stayed classic. An assignor without user data lets "
        "the broker upgrade a running group (kgctl's truth suite, Kafka 4.4.0: "
        "librdkafka's classic members on range were upgraded, on cooperative-sticky "
        "refused for this reason)"
    )
