"""`kgctl monitor`: every group of a cluster followed at once, each completed rebalance
diagnosed as `kgctl explain` diagnoses it, counted per group and exported (docs/monitor.md)."""
