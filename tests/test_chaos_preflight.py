"""What the cluster serves, read true, as a scenario's preflight checks it
(kgctl/chaos/preflight.py over kgctl/adapters/cluster.py's Capabilities). No broker:
the capabilities are given."""

from __future__ import annotations

from kgctl.adapters.cluster import Capabilities


def test_3_7_with_kip848_on_serves_the_consumer_protocol_it_cannot_describe() -> None:
    # Seen on 3.7.2: ConsumerGroupHeartbeat advertised with KIP-848 off or on,
    # ConsumerGroupDescribe in neither case; a consumer member worked with it on. Before,
    # `join --group-protocol consumer` was refused there: "advertises the consumer
    # protocol but refuses it (UNSUPPORTED_VERSION)", which it never answered.
    def on_37(protocols: tuple[str, ...] | None) -> Capabilities:
        return Capabilities("b:1", "3.7", {68: (0, 0)}, "absent", protocols, None)

    assert on_37(("classic", "consumer")).consumer_protocol_missing is None
    off = on_37(("classic",)).consumer_protocol_missing
    assert off == "has group.coordinator.rebalance.protocols=classic"
    unread = on_37(None).consumer_protocol_missing
    assert unread is not None and "could not be read" in unread
    assert "UNSUPPORTED_VERSION" not in unread
