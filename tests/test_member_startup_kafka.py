"""A member whose start-up request times out on a loaded broker keeps going, as Java does.

The check for missing subscribed topics asks for every topic's metadata before the member
subscribes; Java's consumer has no such request, and retries its own metadata requests.
When that request timed out (1,500 members on one machine, docs/benchmarks.md), kgctl
ended the member with exit 10. Here `kgctl proxy` holds that request's answer (the
member's second Metadata request: the first is its bootstrap) past the member's request
timeout.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import MemberProc

from kgctl.proxy.runner import ProxyThread
from kgctl.settings import ClientSettings

pytestmark = pytest.mark.kafka


@pytest.fixture
def proxy(bootstrap: str) -> Iterator[ProxyThread]:
    thread = ProxyThread(ClientSettings.from_options(bootstrap, timeout_s=10))
    thread.start()
    try:
        yield thread
    finally:
        thread.close()


def test_a_timed_out_metadata_request_at_start_is_sent_again(
    proxy: ProxyThread, topic: Any
) -> None:
    t = topic(2)
    name = f"slowmeta-{uuid.uuid4().hex[:6]}"
    rule = proxy.run_.add_rule(f"Metadata:hang:count=1:after=1:client=kgctl-{name}")
    # --timeout 3: the held request times out after 3 s (request.timeout.ms).
    member = MemberProc(proxy.bootstrap, f"g-{name}", t, "--timeout", "3", name=name)
    try:
        joined = member.wait_event("JoinCompleted", timeout=60)
        assert rule.applied == 1, "the proxy never held the member's metadata request"
        assert joined["data"]["assignment"] == {t: [0, 1]}
        assert member.of("MemberFailed") == []
        assert member.stop() == 0, member.stderr
    finally:
        member.kill()
