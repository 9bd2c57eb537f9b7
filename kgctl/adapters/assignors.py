"""kafka-python's assignors re-run on a recorded generation, for explain's advice.

`cooperative_sticky` is the `Reassign` that `kgctl.model.diagnosis.Context` takes: the
model says which members, subscriptions and owned partitions a generation had; the
sticky algorithm (the one kafka-python's cooperative-sticky assignor runs to pick the
final placement) says where each partition would have gone. A partition whose owner
would change is one the cooperative protocol revokes; every other one stays consumed.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka.coordinator.assignors.sticky.sticky_assignor import (
    StickyAssignmentExecutor,
    StickyAssignorMemberMetadataV1,
)
from kafka.structs import TopicPartition as KafkaTP

from kgctl.model.diagnosis import AssignmentInput
from kgctl.model.state import TopicPartition


class _Cluster:
    """The two questions the sticky executor asks of cluster metadata."""

    def __init__(self, partitions: Mapping[str, int]) -> None:
        self._partitions = dict(partitions)

    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self._partitions.get(topic)
        return None if n is None else set(range(n))


def cooperative_sticky(given: AssignmentInput) -> dict[str, tuple[TopicPartition, ...]]:
    """Where the sticky algorithm puts every partition, given who owns what now."""
    members = {
        member: StickyAssignorMemberMetadataV1(
            partitions=[KafkaTP(t, p) for t, p in given.owned.get(member, ())],
            generation=1,
            subscription=list(topics),
        )
        for member, topics in given.subscriptions.items()
    }
    executor = StickyAssignmentExecutor(_Cluster(given.partitions), members)
    executor.perform_initial_assignment()
    executor.balance()
    # get_final_assignment gives (topic, [partition ids]) pairs.
    return {
        member: tuple(
            sorted((topic, p) for topic, ids in executor.get_final_assignment(member) for p in ids)
        )
        for member in members
    }
