"""Temporary-file hygiene: a killed publish's hidden temporary files, removed once their writer is gone."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import psutil

log = logging.getLogger(__name__)


_TMP_COPY = re.compile(r"^\.(?P<stem>.+)\.(?P<pid>\d+)\.tmp\.duckdb(?:\.wal)?$")
_TMP_PARQUET = re.compile(r"^\.(?P<stem>.+)\.(?P<pid>\d+)\.tmp\.parquet$")
# Process start times are kept to a fraction of a second; a file written by the
# live process holding a pid is never older than that process by more than this.
_START_SLACK_S = 1.0


def writer_gone(pid: int, mtime: float) -> bool:
    """Whether the process that wrote a temporary file (named with its pid) can no longer be writing it."""
    if pid == os.getpid():
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return True
        # the pid now names a process started after the file was last written: a reused pid
        return mtime < proc.create_time() - _START_SLACK_S
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def remove_stale_temps(*folders: Path) -> list[Path]:
    """Remove the temporary files of killed publishes from ``folders``; return what was removed.

    Only files named like a publish's temporaries whose writer is gone: its pid
    is not alive, or now names a process younger than the file. A publish that
    is still running keeps its files.
    """
    removed = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            match = _TMP_COPY.match(path.name) or _TMP_PARQUET.match(path.name)
            if not match or not path.is_file():
                continue
            try:
                stale = writer_gone(int(match["pid"]), path.stat().st_mtime)
            except FileNotFoundError:
                continue  # its writer just moved it into place
            if stale:
                path.unlink(missing_ok=True)
                removed.append(path)
    if removed:
        log.info(
            "removed temporary files of killed publishes: %s", ", ".join(str(p) for p in removed)
        )
    return removed
