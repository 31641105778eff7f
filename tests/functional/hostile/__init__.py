"""The hostile-input corpus of `ableaudit import`."""
