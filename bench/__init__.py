"""kgctl benchmarks (issue 8): rebalance latency against the Java client and plain
kafka-python, member density, fold/view throughput, tracing cost.

Run with `python -m bench.run` (full) or `python -m bench.run --smoke` (seconds);
results and method are in docs/benchmarks.md.
"""
