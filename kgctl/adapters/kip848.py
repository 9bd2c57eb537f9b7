"""ConsumerGroupDescribe (api key 69): KIP-848 `consumer` groups, which DescribeGroups
does not describe.

kafka-python 3.0.12 has no such request. Its JSON-schema message classes are reused:
the two schemas live in `kgctl/adapters/messages/`, and kafka-python's network client
negotiates the version (0 or 1) from the broker's ApiVersions like any other request.
A broker without api key 69 makes kafka-python raise IncompatibleBrokerVersion; the
admin adapter turns that into `Unsupported` and stops asking.
"""

from __future__ import annotations

import warnings
from typing import Any

from kgctl.model.snapshot import GroupSnapshot, MemberSnapshot

with warnings.catch_warnings():
    # kafka-python 3.0.12 reads its schemas with importlib.resources' legacy API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.api_message import ApiMessage

    class ConsumerGroupDescribeRequest(ApiMessage, load_json="kgctl.adapters.messages"):  # type: ignore[call-arg]
        """GroupIds, IncludeAuthorizedOperations (v0 and v1 are the same request)."""

    class ConsumerGroupDescribeResponse(ApiMessage, load_json="kgctl.adapters.messages"):  # type: ignore[call-arg]
        """Per group: state, group and assignment epochs, assignor; per member: its
        epoch, subscription, current and target assignment (v1 adds MemberType)."""


# MemberType (v1, KIP-1099): which protocol a member of a consumer group speaks.
MEMBER_TYPES = {0: "classic", 1: "consumer"}


class Unsupported(Exception):
    """The broker does not know ConsumerGroupDescribe (no api key 69 in ApiVersions)."""


def request(group: str) -> Any:
    return ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False)


def _partitions(assignment: Any) -> dict[str, list[int]]:
    out: dict[str, set[int]] = {}
    for tp in getattr(assignment, "topic_partitions", None) or []:
        # The name is empty when the broker no longer knows the topic id (deleted).
        name = str(tp.topic_name or tp.topic_id)
        out.setdefault(name, set()).update(int(p) for p in tp.partitions or [])
    return {t: sorted(ps) for t, ps in sorted(out.items()) if ps}


def snapshot(described: Any, coordinator: str) -> GroupSnapshot:
    """One described group (no error) as a GroupSnapshot with epochs and targets."""
    members = []
    for m in sorted(described.members or [], key=lambda m: str(m.member_id)):
        kind = getattr(m, "member_type", None)
        subscription = tuple(sorted(str(t) for t in m.subscribed_topic_names or []))
        members.append(
            MemberSnapshot(
                member_id=str(m.member_id),
                client_id=m.client_id or "",
                host=m.client_host or "",
                instance_id=m.instance_id,
                subscription=subscription,
                partitions=_partitions(m.assignment),
                member_epoch=int(m.member_epoch),
                target=_partitions(m.target_assignment),
                rack=m.rack_id,
                regex=m.subscribed_topic_regex or None,  # the broker sends "" for none
                member_type=MEMBER_TYPES.get(int(kind)) if kind is not None else None,
            )
        )
    return GroupSnapshot(
        group=str(described.group_id),
        state=str(described.group_state),
        protocol_type="consumer",
        protocol=described.assignor_name or "",
        coordinator=coordinator,
        members=tuple(members),
        group_type="consumer",
        group_epoch=int(described.group_epoch),
        assignment_epoch=int(described.assignment_epoch),
    )
