"""Admin calls through kafka-python for the observer: list, describe, offsets, lag.

The only module of `kgctl watch` that imports kafka-python. Retriable errors are retried
here (tenacity); what is left is raised as a kgctl error for the caller to report.

kafka-python 3.0.12 quirks handled here:
- `KafkaAdminClient.describe_groups` always asks for authorized operations and can fail
  decoding bits it does not know; we send DescribeGroups ourselves without them.
- Member metadata and assignment are raw bytes; they are decoded with kafka-python's
  ConsumerProtocol subscription and assignment structs, and left unreported when they
  do not decode (a non-consumer protocol, or a state where the broker omits them).
- It has no ConsumerGroupDescribe (KIP-848 groups, which DescribeGroups answers with
  GROUP_ID_NOT_FOUND): `kip848.py` defines it. A group DescribeGroups does not find is
  asked again with ConsumerGroupDescribe; once a group is known to be a consumer group it
  is asked that way first. A broker without that request is said so once, then skipped.
- Kafka 3.8 and 3.9 advertise ConsumerGroupDescribe with KIP-848 off (and in ZooKeeper
  mode) and answer each group UNSUPPORTED_VERSION (35): that means "this broker serves
  no consumer groups", the same as not advertising it, never a failed connection.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import kafka.errors as Errors
from kafka import TopicPartition
from kafka.admin import OffsetSpec
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer.metadata import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)
from kafka.protocol.metadata import CoordinatorType
from tenacity import (
    retry,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from kgctl.adapters import clients
from kgctl.adapters.kip848 import (
    ConsumerGroupDescribeRequest,
    Unsupported,
    request,
    snapshot,
)
from kgctl.errors import KgctlError
from kgctl.model.snapshot import GroupListing, GroupSnapshot, MemberSnapshot
from kgctl.settings import ClientSettings

log = logging.getLogger(__name__)


# Retriable errors (a coordinator loading its groups after a restart) are tried again.
_retry = retry(
    retry=retry_if_exception(clients.retriable),
    stop=stop_after_attempt(3),
    wait=wait_exponential(multiplier=0.2, max=2.0),
    reraise=True,
)


def _decode_subscription(raw: Any) -> tuple[str, ...] | None:
    if not raw:
        return None
    try:
        sub = ConsumerProtocolSubscription.decode(bytes(raw))
        return tuple(sorted(str(t) for t in sub.topics))
    except Exception:  # not the consumer protocol, or a version kafka-python lacks
        return None


def _decode_assignment(raw: Any) -> dict[str, list[int]] | None:
    if raw is None:
        return None
    if not raw:
        return {}
    try:
        assignment = ConsumerProtocolAssignment.decode(bytes(raw))
        out: dict[str, list[int]] = {}
        for item in assignment.assigned_partitions:
            out.setdefault(str(item.topic), []).extend(int(p) for p in item.partitions)
        return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}
    except Exception:
        return None


class GroupAdmin:
    """A kafka-python admin client opened lazily and reopened after a failure."""

    def __init__(self, settings: ClientSettings) -> None:
        self.settings = settings
        self._admin: Any = None
        self.kip848: bool | None = None  # the broker answers ConsumerGroupDescribe
        self._consumer_groups: set[str] = set()  # groups on the consumer protocol

    # -- connection -------------------------------------------------------------------

    def _client(self) -> Any:
        if self._admin is None:
            # Bootstrapping already retried for all of --timeout: not again.
            self._admin = clients.admin(self.settings, "kgctl-watch")
        return self._admin

    def close(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            try:
                admin.close()
            except Exception:  # closing a broken client must not hide the real error
                log.debug("admin close failed", exc_info=True)

    def _call(self, fn: Any, *args: Any) -> Any:
        @_retry
        def attempt() -> Any:
            try:
                return fn(self._client(), *args)
            except Unsupported:
                raise  # an answer about the broker, not a failure of the client
            except Exception:
                # A client that failed mid-request may be wedged; start over next time.
                self.close()
                raise

        # A retriable broker error (a coordinator loading its groups after a restart)
        # is retried for up to --timeout, not just three quick attempts.
        patient = attempt.retry_with(stop=stop_after_delay(self.settings.timeout_s))
        try:
            return patient()
        except (KgctlError, Unsupported):
            raise
        except Exception as exc:
            group = args[0] if args and isinstance(args[0], str) else None
            raise clients.translate(exc, self.settings, group=group) from exc

    # -- calls ------------------------------------------------------------------------

    def list_groups(self) -> list[GroupListing]:
        """Every group with its state, type and member count."""
        return list(self._call(_list_groups))

    def describe(self, group: str, with_lag: bool = True) -> GroupSnapshot:
        """The group as its coordinator describes it now; `missing` if it does not exist."""
        snap: GroupSnapshot | None = None
        if group in self._consumer_groups:
            snap = self._describe_consumer(group)
        if snap is None:
            snap = self._call(_describe, group)
            if snap.missing and self.kip848 is not False:
                # DescribeGroups says GROUP_ID_NOT_FOUND for consumer-protocol groups too.
                snap = self._describe_consumer(group) or snap
        assert snap is not None
        if with_lag and not snap.missing:
            try:
                lag = self._call(_lag, group, snap)
            except KgctlError:
                raise
            except Exception:  # lag is a nicety; a snapshot without it is still useful
                log.debug("lag failed", exc_info=True)
                lag = None
            snap = GroupSnapshot(**{**snap.__dict__, "lag": lag})
        return snap

    def _describe_consumer(self, group: str) -> GroupSnapshot | None:
        """ConsumerGroupDescribe; None when the group is not a consumer group (or the
        broker cannot say), so the caller uses DescribeGroups."""
        try:
            snap: GroupSnapshot | None = self._call(_describe_consumer, group)
        except Unsupported as why:
            # Said once per admin: a command uses one (on 3.7 `watch --once -o json`
            # said it twice, its document read through a second admin).
            if self.kip848 is None:
                # "describes", not "serves": 3.7 with KIP-848 on serves consumer groups
                # (seen on 3.7.2) and has no ConsumerGroupDescribe for them.
                log.warning(
                    "the broker at %s describes no consumer-protocol (KIP-848) groups "
                    "(ConsumerGroupDescribe: it %s); describing groups with DescribeGroups only",
                    self.settings.bootstrap,
                    why,
                )
            self.kip848 = False
            return None
        self.kip848 = True
        if snap is None:
            self._consumer_groups.discard(group)
        else:
            self._consumer_groups.add(group)
        return snap


async def _describe_async(admin: Any, group: str) -> tuple[int, Any]:
    coordinator = await admin._find_coordinator_id(group)
    request = DescribeGroupsRequest(groups=[group], include_authorized_operations=False)
    response = await admin._manager.send(request, node_id=coordinator)
    return coordinator, response


def _describe(admin: Any, group: str) -> GroupSnapshot:
    coordinator, response = admin._manager.run(_describe_async, admin, group)
    described = response.groups[0]
    error = Errors.for_code(described.error_code)
    node = admin._manager.cluster.broker_metadata(coordinator)
    where = f"{coordinator} {node.host}:{node.port}" if node is not None else str(coordinator)
    if error is Errors.GroupIdNotFoundError or (
        described.group_state == "Dead" and not described.members
    ):
        return GroupSnapshot(group=group, state="Dead", coordinator=where, missing=True)
    if error is not Errors.NoError:
        raise error(f"DescribeGroups {group}: {described.error_message or error.__name__}")
    consumer = described.protocol_type == "consumer"
    members = tuple(
        MemberSnapshot(
            member_id=m.member_id,
            client_id=m.client_id or "",
            host=m.client_host or "",
            instance_id=m.group_instance_id,
            subscription=_decode_subscription(m.member_metadata) if consumer else None,
            # Outside Stable the broker sends no assignment: unknown, not empty.
            partitions=_decode_assignment(m.member_assignment)
            if consumer and described.group_state == "Stable"
            else None,
        )
        for m in sorted(described.members, key=lambda m: m.member_id)
    )
    return GroupSnapshot(
        group=group,
        state=described.group_state,
        protocol_type=described.protocol_type or "",
        protocol=described.protocol_data or "",
        coordinator=where,
        members=members,
    )


async def _describe_consumer_async(admin: Any, group: str) -> tuple[int, Any]:
    coordinator = await admin._find_coordinator_id(group)
    try:
        response = await admin._manager.send(request(group), node_id=coordinator)
    except Errors.IncompatibleBrokerVersion:
        raise Unsupported("does not know ConsumerGroupDescribe (Kafka 3.7+)") from None
    return coordinator, response


def _describe_consumer(admin: Any, group: str) -> GroupSnapshot | None:
    coordinator, response = admin._manager.run(_describe_consumer_async, admin, group)
    described = response.groups[0]
    error = Errors.for_code(described.error_code)
    if error is Errors.GroupIdNotFoundError:
        return None  # no such group, or a classic one ("... is not a consumer group")
    if error is Errors.UnsupportedVersionError:
        raise Unsupported("advertises ConsumerGroupDescribe but answers UNSUPPORTED_VERSION")
    if error is not Errors.NoError:
        raise error(f"ConsumerGroupDescribe {group}: {described.error_message or error.__name__}")
    node = admin._manager.cluster.broker_metadata(coordinator)
    where = f"{coordinator} {node.host}:{node.port}" if node is not None else str(coordinator)
    return snapshot(described, where)


def _lag(admin: Any, group: str, snap: GroupSnapshot) -> dict[str, dict[int, int]]:
    committed = admin.list_group_offsets(group).get(group, {})
    partitions = {tp for tp, om in committed.items() if om.offset >= 0}
    if not partitions:
        return {}
    ends = admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in partitions})
    out: dict[str, dict[int, int]] = {}
    for tp in sorted(partitions):
        end = ends.get(TopicPartition(tp.topic, tp.partition))
        if end is None:
            continue
        out.setdefault(tp.topic, {})[tp.partition] = max(end.offset - committed[tp].offset, 0)
    return out


def _list_groups(admin: Any) -> list[GroupListing]:
    listed = admin.list_groups()
    names = sorted({g["group_id"] for g in listed})
    counts: dict[str, int] = {}
    classic = [
        g["group_id"] for g in listed if g.get("group_type", "classic") in ("classic", "", None)
    ]
    described_classic: set[str] = set()
    for name in classic:
        try:
            found = _describe(admin, name)
            counts[name] = len(found.members)
            if not found.missing:  # DescribeGroups knows only classic groups
                described_classic.add(name)
        except Exception:  # counts are a nicety; the listing stands without them
            log.debug("describe %s for counts failed", name, exc_info=True)
    for name in (g["group_id"] for g in listed if g.get("group_type") == "consumer"):
        try:
            snap = _describe_consumer(admin, name)
        except Exception:  # as above (including a broker without ConsumerGroupDescribe)
            log.debug("ConsumerGroupDescribe %s for counts failed", name, exc_info=True)
            continue
        if snap is not None:
            counts[name] = len(snap.members)
    by_name = {g["group_id"]: g for g in listed}
    return [
        GroupListing(
            group=name,
            state=str(by_name[name].get("group_state", "") or ""),
            protocol_type=str(by_name[name].get("protocol_type", "") or ""),
            # Before ListGroups v5 (Kafka 3.7) no type is sent: classic when DescribeGroups
            # described it, else not known; never the protocol type, whose "consumer" is
            # every classic consumer's.
            group_type=str(
                by_name[name].get("group_type", "")
                or ("classic" if name in described_classic else "unknown")
            ),
            members=counts.get(name),
        )
        for name in names
    ]


# -- the whole cluster at once (`kgctl monitor`) -------------------------------------------

# Errors that say the group's coordinator moved or is loading: ask again next round.
_COORDINATOR_MOVED = (
    Errors.NotCoordinatorError,
    Errors.CoordinatorNotAvailableError,
    Errors.CoordinatorLoadInProgressError,
)


class ClusterAdmin(GroupAdmin):
    """GroupAdmin for a whole cluster: one ListGroups, then DescribeGroups and
    ConsumerGroupDescribe batched by coordinator (one request per broker a round, not one
    per group). A group whose coordinator moved or is loading is left out of that round
    and its cached coordinator forgotten, so the next round finds the new one."""

    undescribed: frozenset[str] = frozenset()  # the last round's untyped groups no one knew

    def topic_error(self, topic: str) -> str | None:
        """The error a metadata request for `topic` alone answers (None: it is there). A
        request for every topic leaves out the ones the principal may not describe; this
        one says TOPIC_AUTHORIZATION_FAILED, or UNKNOWN_TOPIC_OR_PARTITION if it is not
        there."""
        found = self._call(lambda admin: admin.describe_topics([topic]))
        for t in found:
            code = int(t.get("error_code") or 0)
            if t.get("name", t.get("topic")) == topic and code:
                return str(Errors.for_code(code).message)
        return None if found else "UNKNOWN_TOPIC_OR_PARTITION"

    def list_all(self) -> dict[str, ListedGroup]:
        """Every group's type and state, from one ListGroups per broker: the type it sends
        (ListGroups v5+, Kafka 3.8+), else `unknown` (3.7 sends none; its protocol type
        "consumer" is every classic consumer's too), which `describe_all` finds out; the
        state from v4 (Kafka 2.6+), else None."""
        listed = self._call(lambda admin: admin.list_groups())
        return {
            str(g["group_id"]): ListedGroup(
                _listed_type(g.get("group_type")), g.get("group_state") or None
            )
            for g in listed
        }

    def describe_all(self, groups: dict[str, ListedType]) -> dict[str, GroupSnapshot]:
        """`groups` (name -> type) described now; a group not answered this round (its
        coordinator moved) is absent; one that no longer exists is `missing`. A group of
        unknown type is classic if DescribeGroups describes it, a consumer group if
        ConsumerGroupDescribe does, else absent (never called missing while listed) and
        named in `undescribed` until the next round."""
        snaps, self.undescribed = self._call(_describe_batches, groups)
        return dict(snaps)


# A group's type as ListGroups gives it; "unknown" when it gives none (before v5).
ListedType = Literal["classic", "consumer", "unknown"]


@dataclass(frozen=True)
class ListedGroup:
    """A group as ListGroups lists it: its type, and its state (None before v4)."""

    kind: ListedType
    state: str | None


def _listed_type(sent: object) -> ListedType:
    if sent == "consumer":
        return "consumer"
    if sent == "classic":
        return "classic"
    return "unknown"


def _forget_coordinator(admin: Any, group: str) -> None:
    admin._manager.cluster._coordinators.pop((CoordinatorType.GROUP, group), None)


def _where(admin: Any, node_id: int) -> str:
    node = admin._manager.cluster.broker_metadata(node_id)
    return f"{node_id} {node.host}:{node.port}" if node is not None else str(node_id)


# Groups asked in one describe request: the answer for thousands of groups at once is
# decoded into objects all alive together (a 10,000-group sweep raised the monitor's
# resident memory by about a hundred megabytes, kept afterwards).
DESCRIBE_BATCH = 500

# A round of describes: the groups described, and the groups listed without a type that
# neither DescribeGroups nor ConsumerGroupDescribe knows.
Described = tuple[dict[str, GroupSnapshot], frozenset[str]]


async def _describe_batches_async(admin: Any, groups: dict[str, ListedType]) -> Described:
    coordinators = await admin._find_coordinator_ids(sorted(groups))
    by_node: dict[tuple[int, str], list[str]] = {}
    for group, node in coordinators.items():
        if node is None or node == -1:
            _forget_coordinator(admin, group)
            continue
        # An untyped group is asked as a classic one first: what kgctl follows on 3.7.
        kind = "consumer" if groups[group] == "consumer" else "classic"
        by_node.setdefault((node, kind), []).append(group)
    out: dict[str, GroupSnapshot] = {}
    unknown: set[str] = set()
    untyped_not_classic: dict[int, list[str]] = {}
    for (node, kind), names in sorted(by_node.items()):
        for i in range(0, len(names), DESCRIBE_BATCH):
            for snap in await _describe_batch(admin, node, kind, names[i : i + DESCRIBE_BATCH]):
                if snap.missing and groups[snap.group] == "unknown":
                    # Listed, so not gone: DescribeGroups knows no consumer-protocol group.
                    untyped_not_classic.setdefault(node, []).append(snap.group)
                else:
                    out[snap.group] = snap
    for node, names in sorted(untyped_not_classic.items()):
        found = {
            snap.group: snap
            for snap in await _describe_batch(admin, node, "consumer", names)
            if not snap.missing
        }
        out.update(found)
        # Neither request knows these now (3.7 has no ConsumerGroupDescribe for them):
        # absent this round.
        unknown.update(set(names) - set(found))
    return out, frozenset(unknown)


async def _describe_batch(
    admin: Any, node: int, kind: str, names: list[str]
) -> list[GroupSnapshot]:
    """One DescribeGroups (`classic`) or ConsumerGroupDescribe of groups `node`
    coordinates; a group whose coordinator moved is left out (and forgotten)."""
    if kind == "consumer":
        req = ConsumerGroupDescribeRequest(group_ids=names, include_authorized_operations=False)
    else:
        req = DescribeGroupsRequest(groups=names, include_authorized_operations=False)
    try:
        response = await admin._manager.send(req, node_id=node)
    except Errors.IncompatibleBrokerVersion:
        return []  # no ConsumerGroupDescribe: such groups are followed by their records only
    out = []
    for described in response.groups:
        if (
            kind == "consumer"
            and Errors.for_code(described.error_code) is Errors.UnsupportedVersionError
        ):
            continue  # advertised, off (3.8/3.9 without KIP-848): no consumer groups here
        snap = _batched_snapshot(admin, described, kind, _where(admin, node))
        if snap is None:
            _forget_coordinator(admin, str(described.group_id))
        else:
            out.append(snap)
    return out


def _describe_batches(admin: Any, groups: dict[str, ListedType]) -> Described:
    if not groups:
        return {}, frozenset()
    result: Described = admin._manager.run(_describe_batches_async, admin, groups)
    return result


def _batched_snapshot(admin: Any, described: Any, kind: str, where: str) -> GroupSnapshot | None:
    """One group of a batched answer; None when its coordinator moved (ask again)."""
    name = str(described.group_id)
    error = Errors.for_code(described.error_code)
    if error in _COORDINATOR_MOVED:
        return None
    if error is Errors.GroupIdNotFoundError or (
        kind == "classic" and described.group_state == "Dead" and not described.members
    ):
        return GroupSnapshot(group=name, state="Dead", coordinator=where, missing=True)
    if error is not Errors.NoError:
        raise error(f"describe {name}: {described.error_message or error.__name__}")
    if kind == "consumer":
        return snapshot(described, where)
    consumer = described.protocol_type == "consumer"
    members = tuple(
        MemberSnapshot(
            member_id=m.member_id,
            client_id=m.client_id or "",
            host=m.client_host or "",
            instance_id=m.group_instance_id,
            subscription=_decode_subscription(m.member_metadata) if consumer else None,
            partitions=_decode_assignment(m.member_assignment)
            if consumer and described.group_state == "Stable"
            else None,
        )
        for m in sorted(described.members, key=lambda m: m.member_id)
    )
    return GroupSnapshot(
        group=name,
        state=described.group_state,
        protocol_type=described.protocol_type or "",
        protocol=described.protocol_data or "",
        coordinator=where,
        members=members,
        group_type="classic",
    )
