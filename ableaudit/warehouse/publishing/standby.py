"""Where a publish starts: the standby or a copy of the previous copy, and what it may leave in place since the standby."""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ableaudit.warehouse.publishing.catalog import (
    COPY,
    MANIFEST_TABLE,
    literal,
    manifest_table,
    quote,
    relation_columns,
)
from ableaudit.warehouse.publishing.fingerprints import (
    Fingerprints,
    changed_groups,
    fingerprint,
    recorded_groups,
)
from ableaudit.warehouse.publishing.parquet import FileStamp, recorded_file_stamps

log = logging.getLogger(__name__)


FRESH_COPY_FREE_SHARE = 0.5
"""A publish writes a fresh copy, rather than updating the previous one, when more than this
share of the previous copy's blocks is free (space left by rows deleted in earlier updates)."""


def attach_for_update(con: duckdb.DuckDBPyConnection, tmp: Path, version: str) -> str | None:
    """Attach ``tmp``, a former copy, to be updated; return why it cannot be (then it is left
    detached), or None."""
    manifest = manifest_table(MANIFEST_TABLE)
    try:
        con.execute(f"attach {literal(str(tmp))} as {COPY}")
        versions = {
            v for (v,) in con.execute(f"select distinct storage_version from {manifest}").fetchall()
        }
        used, free = con.execute(
            "select used_blocks, free_blocks from pragma_database_size() where database_name = ?",
            [COPY],
        ).fetchone()
        reason = None
        if versions != {version}:
            reason = f"it is in storage version {', '.join(sorted(versions)) or 'unknown'}, not {version}"
        elif free > FRESH_COPY_FREE_SHARE * (used + free):
            reason = f"{free} of its {used + free} blocks are free"
    except duckdb.Error as err:
        reason = f"it cannot be read and written ({err})"
    if reason is not None:
        try:
            con.execute(f"detach {COPY}")
        except duckdb.Error:
            pass
    return reason


def start_from_previous(
    con: duckdb.DuckDBPyConnection, previous: Path, standby: Path, tmp: Path, version: str
) -> str | None:
    """Attach under ``tmp`` a former copy to update, when there is one that can be; return
    which: 'standby' or 'previous', else None (``tmp`` is then left absent, for a fresh copy).

    The standby, the copy the previous publish replaced, is moved to ``tmp``: updating it
    writes what changed in the last two builds, where a copy of the previous copy would first
    write the whole file again (2.4 GB at a million generations). It is not used when it is
    the previous copy itself (a publish killed between its two moves), nor when a reader still
    has it open (DuckDB's lock refuses the writer); a copy of ``previous`` is made then. Either
    is not updated when it is in another storage version, when it cannot be read, or when more
    than ``FRESH_COPY_FREE_SHARE`` of it is free space.
    """
    if standby.is_file():
        if previous.is_file() and os.path.samefile(standby, previous):
            standby.unlink()
        else:
            os.replace(standby, tmp)
            reason = attach_for_update(con, tmp, version)
            if reason is None:
                return "standby"
            log.info("copying %s rather than updating the copy before it: %s", previous, reason)
            remove_copy(tmp)
    if not previous.is_file():
        return None
    shutil.copyfile(previous, tmp)
    reason = attach_for_update(con, tmp, version)
    if reason is None:
        return "previous"
    log.info("writing a fresh copy rather than updating %s: %s", previous, reason)
    remove_copy(tmp)
    return None


def remove_copy(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.with_name(path.name + ".wal").unlink(missing_ok=True)


def keep_standby(previous: Path, standby: Path) -> None:
    """Keep the copy about to be replaced as the standby that the next publish updates (a hard
    link: the file stays where readers that opened it read it). Where the file system has no
    hard links, there is no standby and the next publish copies the copy."""
    standby.unlink(missing_ok=True)
    if not previous.is_file():
        return
    try:
        os.link(previous, standby)
    except OSError as err:
        log.info("no standby copy kept beside %s: %s", previous, err)


@dataclass
class InPlace:
    """What the files in place were written from, as the Parquet files go: the record of the
    publish that left them (the previous copy's)."""

    files: dict[str, FileStamp]
    """The Parquet files it recorded, by file name."""
    unchanged: set[tuple[str, str]]
    """The relations whose rows the new copy holds as it did."""
    changed: dict[tuple[str, str], list[str | None]]
    """Of the relations compared model by model, the models whose rows differ from it."""


def in_place_since_standby(
    con: duckdb.DuckDBPyConnection,
    previous: Path,
    current: dict[tuple[str, str], Fingerprints],
    relations: list[tuple[str, str]],
) -> InPlace:
    """``InPlace`` for a copy updated from the standby: compared with the previous copy, which
    the Parquet files in place were written from (the standby is one build older). A relation
    with recorded groups is compared by their fingerprints; another (a small mart) by the
    fingerprint of its rows in both copies. Nothing is unchanged when the previous copy cannot
    be read."""
    placed = "published_in_place"
    try:
        con.execute(f"attach {literal(str(previous))} as {placed} (read_only)")
    except duckdb.Error as err:
        log.info("writing every Parquet file again: %s cannot be read (%s)", previous, err)
        return InPlace({}, set(), {})
    try:
        recorded = recorded_groups(con, placed)
        unchanged: set[tuple[str, str]] = set()
        changed: dict[tuple[str, str], list[str | None]] = {}
        for schema, name in relations:
            now, before = current.get((schema, name)), recorded.get((schema, name))
            if now is not None and before is not None:
                changed[(schema, name)] = changed_groups(now, before)
                if not changed[(schema, name)]:
                    unchanged.add((schema, name))
                continue
            columns = relation_columns(con, COPY, schema, name)
            if not columns or relation_columns(con, placed, schema, name) != columns:
                continue
            listed = ", ".join(quote(c) for c, _ in columns)
            rows = "select {} from {}.{}.{}"
            if fingerprint(con, rows.format(listed, COPY, quote(schema), quote(name))) == (
                fingerprint(con, rows.format(listed, placed, quote(schema), quote(name)))
            ):
                unchanged.add((schema, name))
        return InPlace(recorded_file_stamps(con, placed), unchanged, changed)
    finally:
        con.execute(f"detach {placed}")
