"""kgctl: diagnose and provoke Apache Kafka consumer-group rebalances."""

__version__ = "0.1.0"
