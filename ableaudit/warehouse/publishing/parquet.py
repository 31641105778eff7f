"""The Parquet files: one per mart (a folder of one per model for ``PARQUET_BY_MODEL``), each stamped with its size, modification time and inode so an unchanged file is kept."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import duckdb

from ableaudit.warehouse.publishing.catalog import (
    COPY,
    FILES_TABLE,
    GROUP_COLUMN,
    insert_rows,
    literal,
    manifest_table,
    quote,
    split_relation,
)


def parquet_stem(schema: str, name: str) -> str:
    return name if schema == "main" else f"{schema}.{name}"


def parquet_select(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> str:
    """The query that exports a relation of the copy to Parquet.

    Parquet has no 128-bit integer: DuckDB would write a HUGEINT (what ``sum``
    of integers returns, e.g. a count of outcomes) as a DOUBLE. Such columns
    are written as BIGINT, exact for every count; a value beyond BIGINT fails
    the publish instead of losing digits.
    """
    columns = con.execute(
        "select column_name, data_type from duckdb_columns() where database_name = ? and schema_name = ? "
        "and table_name = ? order by column_index",
        [COPY, schema, name],
    ).fetchall()
    select = [
        f"cast({quote(c)} as bigint) as {quote(c)}" if t in ("HUGEINT", "UHUGEINT") else quote(c)
        for c, t in columns
    ]
    return f"select {', '.join(select)} from {COPY}.{quote(schema)}.{quote(name)}"


FileStamp = tuple[int, int, int]
"""A file's size, modification time (ns) and inode: what a publish records of each Parquet
file it leaves in place, and what tells the next one that the file is still that one."""


def file_stamp(path: Path) -> FileStamp | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def recorded_file_stamps(
    con: duckdb.DuckDBPyConnection, catalog: str = COPY
) -> dict[str, FileStamp]:
    """The Parquet files a copy recorded, by file name; none when it recorded none."""
    try:
        rows = con.execute(
            f"select file_name, n_bytes, modified_ns, inode from {manifest_table(FILES_TABLE, catalog)}"
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {name: (int(n), int(mtime), int(inode)) for name, n, mtime, inode in rows}


def write_file_stamps(
    con: duckdb.DuckDBPyConnection, files: list[tuple[str, str, str, FileStamp]]
) -> None:
    """``publish.parquet_files``: each Parquet file of the copy (schema, relation, file name)
    with its stamp as it will lie in place (a move keeps a file's size, modification time
    and inode)."""
    con.execute(
        f"""
        create table {manifest_table(FILES_TABLE)} (
            schema_name varchar not null,
            relation_name varchar not null,
            file_name varchar not null,
            n_bytes bigint not null,
            modified_ns bigint not null,
            inode ubigint not null
        )
        """
    )
    rows = [
        {
            "schema_name": schema,
            "relation_name": name,
            "file_name": file_name,
            "n_bytes": size,
            "modified_ns": mtime,
            "inode": inode,
        }
        for schema, name, file_name, (size, mtime, inode) in files
    ]
    insert_rows(con, manifest_table(FILES_TABLE), rows)


PARQUET_BY_MODEL: frozenset[str] = frozenset({"pair_details"})
"""Marts exported as a folder of Parquet files, one per value of ``GROUP_COLUMN`` (a text
column; ``parquet/pair_details/<model>.<digest>.parquet``), not as one file: the marts that hold
answer texts, whose file took most of a publish's time at a million generations. A publish
then writes the files of the models that changed, and keeps the others."""


def model_file_name(value: str | None) -> str:
    """The file of a ``PARQUET_BY_MODEL`` mart that holds the rows of one model: a readable
    part of its id and a digest of all of it, so that any id (a path, a URL) gives a short,
    safe and distinct name."""
    if value is None:
        return "null.parquet"
    readable = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip(".-")[:60] or "model"
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:12]
    return f"{readable}.{digest}.parquet"


def write_parquet(
    con: duckdb.DuckDBPyConnection,
    select: str,
    part: Path,
    written: list[tuple[Path, Path]],
    final: Path,
) -> FileStamp:
    """Write the rows of ``select`` to ``part``, to be moved to ``final`` once the copy is in
    place (``written``); return the file's stamp."""
    written.append((part, final))
    con.execute(f"copy ({select}) to {literal(str(part))} (format parquet)")
    stamp = file_stamp(part)
    if stamp is None:
        raise RuntimeError(f"the Parquet file {part} vanished while it was being written")
    return stamp


def model_files(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    name: str,
    parquet_dir: Path,
    changed: list[str | None] | None,
    recorded: dict[str, FileStamp],
    written: list[tuple[Path, Path]],
    removed: list[Path],
) -> list[tuple[str, str, str, FileStamp]]:
    """Write the files of a ``PARQUET_BY_MODEL`` mart that need it; return every file of the
    mart with its stamp, as ``publish.parquet_files`` records it (``<mart>/<file>``).

    A model's file is kept when the mart was compared model by model (``changed``: the models
    whose rows differ), the model is not among those, and the folder holds exactly the files
    the previous publish recorded; otherwise every model's file is written again. Files of models the mart no longer holds, and the single file an
    older publish wrote (``<mart>.parquet``), go into ``removed``; new files into ``written``
    (temporary name, final name), both acted on once the copy is in place.
    """
    stem = parquet_stem(schema, name)
    folder = parquet_dir / stem
    folder.mkdir(exist_ok=True)
    prefix = f"{stem}/"
    on_disk = {f"{prefix}{p.name}": file_stamp(p) for p in folder.glob("*.parquet")}
    on_record = {f: st for f, st in recorded.items() if f.startswith(prefix)}
    intact = changed is not None and on_disk == on_record
    redo = set(changed or ())
    select = parquet_select(con, schema, name)
    group = quote(GROUP_COLUMN)
    values = [v for (v,) in con.execute(f"select distinct {group} from ({select})").fetchall()]
    files, pid = [], os.getpid()
    for value in values:
        file_name = prefix + model_file_name(value)
        if intact and value not in redo and file_name in on_disk:
            files.append((schema, name, file_name, on_disk[file_name]))
            continue
        final = parquet_dir / file_name
        part = folder / f".{final.stem}.{pid}.tmp.parquet"
        where = f"{group} is null" if value is None else f"{group} = {literal(value)}"
        stamp = write_parquet(con, f"{select} where {where}", part, written, final)
        files.append((schema, name, file_name, stamp))
    kept = {f for _, _, f, _ in files}
    removed += [parquet_dir / f for f in on_disk if f not in kept]
    removed.append(parquet_dir / f"{stem}.parquet")
    return files


def parquet_folder(published: str | os.PathLike) -> Path:
    """The folder of the Parquet files that go with the published copy ``published``."""
    copy = Path(published)
    return copy.parent / copy.stem / "parquet"


def parquet_glob(published: str | os.PathLike, relation: str) -> str:
    """What ``read_parquet`` reads for one exported relation ("schema.name", or "name" for
    the main schema) of the copy ``published``: its file, or the files of its folder for a
    mart of ``PARQUET_BY_MODEL``."""
    stem = parquet_stem(*split_relation(relation))
    folder = parquet_folder(published)
    if (folder / stem).is_dir():
        return str(folder / stem / "*.parquet")
    return str(folder / f"{stem}.parquet")
