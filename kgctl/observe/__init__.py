"""The broker observer behind `kgctl watch`: snapshots in, events out, folded into state."""
