"""How the __consumer_offsets reader starts: a cluster that does not answer is waited
for, a refusal ends the reader once. Pure: the opening step is made to fail."""

from __future__ import annotations

import threading

import kafka.errors as Errors
import pytest

from kgctl.adapters import offsets_log
from kgctl.adapters.group_log import GroupLogUnavailable
from kgctl.adapters.offsets_log import OffsetsLogFollower
from kgctl.errors import ConnectError
from kgctl.settings import ClientSettings


class _FailingFollower(OffsetsLogFollower):
    """Opens by raising each of `failures` in turn, then stops itself."""

    def __init__(self, failures: list[BaseException], **callbacks: object) -> None:
        super().__init__(ClientSettings(), lambda _g: True, lambda _r, _n: None, **callbacks)  # type: ignore[arg-type]
        self.failures = failures
        self.opened = 0

    def _open(self) -> object:
        self.opened += 1
        if self.failures:
            raise self.failures.pop(0)
        self.stop()
        raise Errors.KafkaTimeoutError("stopped by the test")


def _run(follower: OffsetsLogFollower) -> None:
    thread = threading.Thread(target=follower.run)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the reader did not end"


def test_a_refused_topic_is_said_once_and_not_retried() -> None:
    unavailable: list[str] = []
    errors: list[str] = []
    follower = _FailingFollower(
        [GroupLogUnavailable("not authorized to describe __consumer_offsets")],
        on_unavailable=unavailable.append, on_error=errors.append,
    )  # fmt: skip
    _run(follower)
    assert unavailable == ["not authorized to describe __consumer_offsets"]
    assert errors == [] and follower.opened == 1


@pytest.mark.parametrize(
    "failure",
    [ConnectError("no broker at 127.0.0.1:1"), Errors.KafkaTimeoutError("metadata"),
     Errors.KafkaConnectionError("reset")],
)  # fmt: skip
def test_a_cluster_that_does_not_answer_is_waited_for(
    failure: BaseException, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(offsets_log, "START_RETRY_FIRST_S", 0.01)
    unavailable: list[str] = []
    errors: list[str] = []
    follower = _FailingFollower(
        [failure, failure], on_unavailable=unavailable.append, on_error=errors.append
    )
    _run(follower)
    assert unavailable == []
    assert follower.opened == 3 and len(errors) >= 2
