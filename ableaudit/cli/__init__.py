"""The ``ableaudit`` command line."""

from ableaudit.cli.main import main

__all__ = ["main"]
