"""Publish the warehouse for BI: a read-only copy that DuckDB 1.x clients open, and Parquet files.

BI tools never read the live file: DuckDB lets one process write, and a reader
would block the next build. After each build, ``publish`` writes

- ``published/<warehouse name>.duckdb`` (``published/ableaudit.duckdb`` for the
  default warehouse): every relation of the warehouse as a plain table, in an
  older DuckDB storage format (``DEFAULT_STORAGE_VERSION``), because most BI
  tools embed a DuckDB 1.x, which refuses the format the project's DuckDB
  writes by default. A view is materialised: a client without the project's
  Python (and its user-defined functions) could not run it, and older clients
  could not bind some of it. A view that cannot be read even here is left out.
  Columns in ``WITHHELD_COLUMNS`` (the stored audit and training configs) never
  reach the copy. ``publish.relations`` in the copy says what it holds and what
  it left out.
- ``published/<warehouse name>/parquet/<mart>.parquet``: one file per mart (and
  per relation of ``EXTRA_RELATIONS``), in a folder of its own per warehouse, so
  two warehouses publishing into one folder never overwrite each other. A mart of
  ``PARQUET_BY_MODEL`` (``pair_details``, which holds the answers) is a folder of
  one file per model instead.

A publish starts from a former copy when there is one in the same storage
version: the standby (``published/.<warehouse name>.standby.duckdb``: the copy the
previous publish replaced, kept as a second name of that file), else a copy of the
previous copy. It leaves each relation whose rows did not change as it is, and for
a relation that changed deletes the rows that are gone and inserts the new ones. A
relation with a ``model_id`` is compared model by model, against the fingerprints
that copy recorded (``publish.relation_groups``), and the rows of each changed model
replaced whole; any other, row by row (a multiset difference of row hashes); a
relation whose columns changed, or more than half of whose rows changed, is written
again whole, and so is the whole copy when more than half of its file is free space.
A build after one more model so rewrites only the rows it added (from the standby,
those of the last two builds), not every relation, nor, from the standby, the whole
file first (2.4 GB at a million generations). The Parquet file of a mart unchanged
since the previous copy is kept when it is still the file the previous publish wrote
(``publish.parquet_files`` records each file's size, modification time and inode);
of a mart written a file per model, the files of the models whose rows did not
change are kept.

Each file is first written under a hidden temporary name carrying the
writer's pid (``.<stem>.<pid>.tmp.duckdb``, ``.<mart>.<pid>.tmp.parquet``) and
then moved into place with ``os.replace``, so a reader sees the previous
complete copy or the new one, never half of one. A publish that was killed
leaves its temporary files behind; the next publish removes those whose writer
is gone.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

import duckdb

from ableaudit import PROJECT_ROOT
from ableaudit.warehouse import warehouse_path
from ableaudit.warehouse.connection import apply_memory_limit
from ableaudit.warehouse.publishing.catalog import (
    COPY,
    DEFAULT_STORAGE_VERSION,
    DEFINITIONS_TABLE,
    FILES_TABLE,
    GROUP_COLUMN,
    GROUPS_TABLE,
    MANIFEST_SCHEMA,
    MANIFEST_TABLE,
    STORAGE_VERSION_ENV,
    PublishedRelation,
    list_relations,
    literal,
    quote,
    relation_columns,
    split_relation,
)
from ableaudit.warehouse.publishing.catalog import WITHHELD_COLUMNS as WITHHELD_COLUMNS
from ableaudit.warehouse.publishing.fingerprints import Groups, built_fingerprints, recorded_groups
from ableaudit.warehouse.publishing.manifest import write_manifest
from ableaudit.warehouse.publishing.parquet import (
    PARQUET_BY_MODEL,
    file_stamp,
    model_files,
    parquet_folder,
    parquet_select,
    parquet_stem,
    recorded_file_stamps,
    write_file_stamps,
    write_parquet,
)
from ableaudit.warehouse.publishing.parquet import model_file_name as model_file_name
from ableaudit.warehouse.publishing.parquet import parquet_glob as parquet_glob
from ableaudit.warehouse.publishing.rows import copy_relation
from ableaudit.warehouse.publishing.standby import (
    InPlace,
    in_place_since_standby,
    keep_standby,
    start_from_previous,
)
from ableaudit.warehouse.publishing.temps import remove_stale_temps
from ableaudit.warehouse.publishing.temps import writer_gone as writer_gone
from ableaudit.warehouse.publishing.views import (
    Changes,
    change_of,
    group_local_views,
    in_dependency_order,
    local_candidates,
    query_inputs,
    recorded_definitions,
    view_definitions,
)

log = logging.getLogger(__name__)

MARTS_DIRS = (PROJECT_ROOT / "models" / "marts", PROJECT_ROOT / "python_models" / "marts")


# Relations ("schema.name", or "name" for the main schema) exported as Parquet
# besides the marts, and required to exist, e.g. a response-level export table
# built by dbt. Every relation is in the copy anyway.
EXTRA_RELATIONS: tuple[str, ...] = ()


def mart_names(marts_dirs: tuple[Path, ...] = MARTS_DIRS) -> list[str]:
    """Every model under models/marts and python_models/marts (one .sql or .py file per mart)."""
    return sorted(p.stem for d in marts_dirs for p in d.rglob("*") if p.suffix in (".sql", ".py"))


def resolve_storage_version(storage_version: str | None = None) -> str:
    """The storage format to publish in: the argument, else $ABLEAUDIT_PUBLISH_STORAGE_VERSION, else the default.

    A bare '1.2.0' means 'v1.2.0'; 'latest' is the project's own DuckDB's format
    (which DuckDB 1.x clients refuse).
    """
    chosen = (
        storage_version or os.environ.get(STORAGE_VERSION_ENV) or DEFAULT_STORAGE_VERSION
    ).strip()
    if re.fullmatch(r"\d+\.\d+\.\d+", chosen):
        chosen = "v" + chosen
    return chosen


def publish(
    warehouse: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    storage_version: str | None = None,
) -> Path:
    """Write the BI copy and the Parquet files; return the copy's path.

    ``storage_version`` (else $ABLEAUDIT_PUBLISH_STORAGE_VERSION, else
    ``DEFAULT_STORAGE_VERSION``) is the DuckDB storage format of the copy: a
    DuckDB client of that version or newer opens it.
    """
    src = warehouse_path(warehouse)
    if not src.is_file():
        raise FileNotFoundError(f"no warehouse at {src}; run `ableaudit build` first")
    version = resolve_storage_version(storage_version)
    out = Path(out_dir).expanduser().resolve() if out_dir else src.parent / "published"
    catalog = src.stem
    parquet_dir = parquet_folder(out / src.name)
    parquet_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out, parquet_dir, *(parquet_dir / m for m in PARQUET_BY_MODEL))
    target = out / src.name
    standby = out / f".{catalog}.standby.duckdb"
    pid = os.getpid()
    tmp = out / f".{catalog}.{pid}.tmp.duckdb"
    tmp_wal = tmp.with_name(tmp.name + ".wal")
    for leftover in (tmp, tmp_wal):
        leftover.unlink(missing_ok=True)
    written: list[tuple[Path, Path]] = []
    removed: list[Path] = []  # files of a by-model mart that the new copy no longer holds
    con = duckdb.connect(":memory:")
    # under a memory limit, what does not fit spills here, not into the current folder
    spill = tempfile.mkdtemp(prefix="ableaudit-publish-")
    try:
        con.execute(f"set temp_directory = {literal(spill)}")
        con.execute("set enable_progress_bar = false")
        apply_memory_limit(con)
        try:
            con.execute(f"attach {literal(str(src))} as {quote(catalog)} (read_only)")
        except duckdb.Error as err:
            raise RuntimeError(
                f"cannot read the warehouse {src} to publish it ({err}); close the process "
                "writing it (a dbt run, an audit) and run `ableaudit publish` again"
            ) from None
        relations = list_relations(con, catalog)
        kinds = {(schema, name): kind for schema, name, kind in relations}
        missing = [m for m in mart_names() if kinds.get(("main", m)) != "table"]
        if missing:
            raise RuntimeError(
                f"marts {missing} are not tables in {src}; run `ableaudit build` before publishing"
            )
        extra = [split_relation(r) for r in EXTRA_RELATIONS]
        absent = [f"{s}.{n}" for s, n in extra if (s, n) not in kinds]
        if absent:
            raise RuntimeError(
                f"relations {absent} to export are not in {src}; run `ableaudit build` before publishing"
            )
        own = [
            f"{MANIFEST_SCHEMA}.{t}"
            for t in (MANIFEST_TABLE, GROUPS_TABLE, FILES_TABLE, DEFINITIONS_TABLE)
            if (MANIFEST_SCHEMA, t) in kinds
        ]
        if own:
            raise RuntimeError(
                f"{src} has its own {' and '.join(own)}, a name the copy's manifest takes"
            )
        try:
            updating = start_from_previous(con, target, standby, tmp, version)
            if updating is None:
                con.execute(
                    f"attach {literal(str(tmp))} as {COPY} (storage_version {literal(version)})"
                )
        except duckdb.Error as err:
            if "version" not in str(err).lower():
                raise RuntimeError(f"cannot write the published copy {tmp} ({err})") from None
            raise ValueError(
                f"storage version {version!r} is not one DuckDB {duckdb.__version__} can write; set "
                f"--storage-version or ${STORAGE_VERSION_ENV} to a DuckDB release such as "
                f"{DEFAULT_STORAGE_VERSION} (the default, read by DuckDB 1.1 and newer) or v1.4.0"
            ) from None
        in_copy: dict[tuple[str, str], list[tuple[str, str]]] = {}
        groups = Groups(
            recorded_groups(con) if updating else {}, {}, built=built_fingerprints(con, catalog)
        )
        # the copy's own record is that of the files in place only when it is the previous copy
        recorded_files = recorded_file_stamps(con) if updating == "previous" else {}
        if updating:
            for schema, name, _ in list_relations(con, COPY):
                if schema != MANIFEST_SCHEMA:
                    in_copy[(schema, name)] = relation_columns(con, COPY, schema, name)
        # a view that declared its groups local is brought in after its inputs, and hashed only
        # for the groups whose rows changed in them, while its definition is the one the
        # previous copy's fingerprints were taken with
        definitions = view_definitions(con, catalog)
        previous_definitions = recorded_definitions(con) if updating else {}
        inputs = {
            key: query_inputs(con, catalog, definitions[key])
            for key in group_local_views(con, catalog, definitions)
            if previous_definitions.get(key) == definitions[key]
        }
        changes: Changes = {}
        copied: dict[tuple[str, str], PublishedRelation] = {}
        for s, n, k in in_dependency_order(relations, inputs):
            candidates = local_candidates(inputs[(s, n)], changes) if (s, n) in inputs else None
            copied[(s, n)] = copy_relation(
                con, catalog, s, n, k, version, in_copy, groups, candidates
            )
            changes[(s, n)] = change_of(copied[(s, n)], groups)
        manifest = [copied[(s, n)] for s, n, _ in relations]
        published = {(r.schema, r.name): r for r in manifest if r.published}
        gone = in_copy.keys() - published.keys()  # from the warehouse, or now left out
        for schema, name in gone:
            con.execute(f"drop table {COPY}.{quote(schema)}.{quote(name)}")
        write_manifest(con, manifest, version, groups.current, definitions)
        exported = [("main", m) for m in mart_names()] + extra
        for schema, name in exported:
            if (schema, name) not in published:
                raise RuntimeError(f"{schema}.{name} could not be published; see the warning above")
        if updating == "standby":
            in_place = in_place_since_standby(con, target, groups.current, exported)
        else:
            in_place = InPlace(
                recorded_files,
                {key for key, r in published.items() if r.change == "unchanged"},
                groups.changed,
            )
        files = []
        for schema, name in exported:
            stem = parquet_stem(schema, name)
            final = parquet_dir / f"{stem}.parquet"
            if stem in PARQUET_BY_MODEL and (GROUP_COLUMN, "VARCHAR") in relation_columns(
                con, COPY, schema, name
            ):
                files += model_files(
                    con,
                    schema,
                    name,
                    parquet_dir,
                    in_place.changed.get((schema, name)),
                    in_place.files,
                    written,
                    removed,
                )
                continue
            # kept when the mart is unchanged and the file is the one the last publish left
            # (one killed between its moves leaves an older file beside a current copy)
            recorded = in_place.files.get(final.name)
            if (
                (schema, name) in in_place.unchanged
                and recorded is not None
                and file_stamp(final) == recorded
            ):
                files.append((schema, name, final.name, recorded))
                continue
            part = parquet_dir / f".{stem}.{pid}.tmp.parquet"
            select = parquet_select(con, schema, name)
            files.append(
                (schema, name, final.name, write_parquet(con, select, part, written, final))
            )
        write_file_stamps(con, files)
        con.execute(f"detach {COPY}")
    except BaseException:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
        for leftover in (tmp, tmp_wal, *(part for part, _ in written)):
            leftover.unlink(missing_ok=True)
        raise
    con.close()
    shutil.rmtree(spill, ignore_errors=True)
    keep_standby(target, standby)
    os.replace(tmp, target)
    for part, final in written:
        os.replace(part, final)
    for path in removed:
        path.unlink(missing_ok=True)
    return target
