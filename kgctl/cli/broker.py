"""`kgctl broker`: placeholder until the broker module lands."""
