"""Whether `ableaudit build` has anything to do: a stamp of what the last build read.

A build's tables, published copy and report are a function of what it reads:
the raw layer, the dbt project, this package's code, the installed libraries,
the settings (dbt vars, ``ABLEAUDIT_*`` and ``DBT_*`` variables, the files and
folders a var names, the project's defaults included) and the Regard classifier it would load. After a build that
succeeded end to end (dbt, publish, report), a stamp inside the warehouse
(table ``dbt_state.build_stamp``, never published) records a digest of each of
those inputs, of what the build left (the warehouse's relations and their sizes,
the published copy and the report, by their paths relative to the warehouse's
folder), and the id of the dbt invocation that built it. The next build with the
same digests and the same outputs in place has nothing to change: it is skipped in
about a second. ``ableaudit build --force`` builds anyway.

The stamp holds only while the last dbt command recorded in the warehouse
(``dbt_state.invocations``, macro record_invocation, written when a command starts)
is the build that wrote it. So a file that was never built has no stamp; a restored
or copied file carries the stamp of its own build, with its own project digest; and
a `dbt build --vars ...`, a `dbt seed`, an `ableaudit gate` or a training flow's build
with other vars, even one stopped midway, leaves no stamp to trust: the next build is a
full one, and restores what the project builds by default. A build of part of the
warehouse with the project's vars under the stamped build's project, libraries and
settings (ableaudit.dbt.selected.build_selected: the judges', the prompts') carries the stamp
over when it succeeds (``carry``).

The digest of the raw layer is read by DuckDB: the row count and the sum of a
hash of every row of every raw table, so an edit made outside the landing
layer counts as well as a landing.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ableaudit import PROJECT_ROOT, __version__

PROJECT_INPUTS = (
    "dbt_project.yml",
    "profiles.yml",
    "selectors.yml",
    "seeds",
    "models",
    "macros",
    "python_models",
    "tests/dbt",
)
"""What dbt reads from the project (a missing one counts as empty)."""

SETTINGS_PREFIXES = ("ABLEAUDIT_", "DBT_")
"""Environment variables a build may read; their values are digested, never stored."""

_NOT_SETTINGS = ("KEY", "TOKEN", "SECRET", "PASSWORD")
"""Credentials a build never reads: left out of the digest."""

_LOCATIONS = {
    "ABLEAUDIT_WAREHOUSE",
    "DBT_TARGET_PATH",
    "DBT_LOG_PATH",
    "ABLEAUDIT_DUCKDB_MEMORY_LIMIT",
}
"""Where the warehouse and dbt's logs and artifacts are, and how much memory DuckDB may use,
not what a build computes: a warehouse copied or moved elsewhere, or built under another
memory limit, keeps its stamp."""

_REPORTING = ("DBT_LOG_", "DBT_USE_COLORS", "DBT_PRINTER_WIDTH", "DBT_QUIET", "DBT_SEND_ANONYMOUS")
"""dbt's settings of what it prints and logs (`ableaudit -v` sets its log levels), not of what it
computes: a quiet build and a verbose one keep each other's stamp."""


def digest_files(digest: Any, root: Path, paths: Iterable[Path]) -> None:
    for f in sorted(paths):
        if f.is_file() and "__pycache__" not in f.parts:
            digest.update(str(f.relative_to(root)).encode() + b"\0")
            digest.update(f.read_bytes() + b"\0")


def project_digest() -> str:
    """The dbt project's files and this package's source."""
    digest = hashlib.sha256(__version__.encode())
    for name in PROJECT_INPUTS:
        path = PROJECT_ROOT / name
        digest_files(digest, PROJECT_ROOT, path.rglob("*") if path.is_dir() else [path])
    package = Path(__file__).resolve().parents[1]
    digest_files(digest, package.parent, package.rglob("*.py"))
    return digest.hexdigest()


def libraries_digest() -> str:
    """Every installed distribution and its version (a new scorer or statistics library
    changes what the build computes)."""
    from importlib.metadata import distributions

    found = sorted({(d.metadata["Name"] or "", d.version) for d in distributions()})
    return hashlib.sha256(repr(found).encode()).hexdigest()


def _path_key(value: str) -> Any:
    """A file's content digest, a folder's listing, or None for what is not a path."""
    try:
        path = Path(value).expanduser()
        if path.is_file():
            return ("file", hashlib.sha256(path.read_bytes()).hexdigest())
        if path.is_dir():
            return (
                "folder",
                [
                    (str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns)
                    for f in sorted(path.rglob("*"))
                    if f.is_file()
                ],
            )
    except (OSError, ValueError):
        return None
    return None


def project_vars(project: Path = PROJECT_ROOT) -> dict[str, Any]:
    """The vars the project sets in its ``dbt_project.yml`` (the defaults ``--vars`` overrides)."""
    import yaml

    try:
        found = yaml.safe_load((project / "dbt_project.yml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    found = found.get("vars") if isinstance(found, dict) else None
    return found if isinstance(found, dict) else {}


def settings_digest(
    vars: str | None, environ: Mapping[str, str] | None = None, project: Path = PROJECT_ROOT
) -> str:
    """The dbt vars (and the files and folders they name, the project's defaults among them:
    a local ``similarity_model`` folder edited in place), the build's environment variables,
    and the Regard classifier a build would load (or why it cannot)."""
    import yaml

    from ableaudit.scorers import regard

    environ = os.environ if environ is None else environ
    parsed = yaml.safe_load(vars) if vars else {}
    parsed = parsed if isinstance(parsed, dict) else {"": parsed}
    merged = {**project_vars(project), **parsed}
    named = {k: _path_key(v) for k, v in merged.items() if isinstance(v, str) and v}
    settings = {
        k: v
        for k, v in environ.items()
        if k.startswith(SETTINGS_PREFIXES)
        and k not in _LOCATIONS
        and not k.startswith(_REPORTING)
        and not any(word in k for word in _NOT_SETTINGS)
    }
    reference = (
        parsed.get("regard_model") or environ.get("ABLEAUDIT_REGARD_MODEL") or regard.DEFAULT_MODEL
    )
    allow_download = environ.get("ABLEAUDIT_ALLOW_DOWNLOAD") == "1"
    parts = [
        vars or "",
        repr(sorted(named.items())),
        repr(sorted(settings.items())),
        regard.location_key(reference, allow_download),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def raw_table_digests(warehouse: Path) -> dict[str, str]:
    """Per table of the raw schema: a digest of its definition, row count and the sum of its
    rows' hashes."""
    from ableaudit.warehouse import connect

    con = connect(warehouse, read_only=True)
    try:
        tables = con.execute(
            "select table_name, sql from duckdb_tables() "
            "where schema_name = 'raw' and not internal order by table_name"
        ).fetchall()
        digests = {}
        for name, sql in tables:
            (rows,) = con.execute(
                f'select count(*), coalesce(sum(hash(t)), 0) from raw."{name}" as t'
            ).fetchall()
            digests[name] = hashlib.sha256(repr([sql, rows]).encode()).hexdigest()
    finally:
        con.close()
    return digests


def raw_digest(warehouse: Path, tables: Mapping[str, str] | None = None) -> str:
    """One digest of the raw layer: of ``raw_table_digests`` (read when not given)."""
    tables = raw_table_digests(warehouse) if tables is None else tables
    return hashlib.sha256(repr(sorted(tables.items())).encode()).hexdigest()


STAMP = "dbt_state.build_stamp"
"""The stamp: one row, inside the warehouse it describes (never published)."""

INVOCATIONS = "dbt_state.invocations"
"""Every dbt command that ran on the warehouse (macro record_invocation)."""

_BOOKKEEPING = ("build_stamp", "invocations")
"""The dbt_state tables that describe builds, not what a build computes."""


def exists(con: Any, table: str) -> bool:
    """Whether ``table`` (schema.name) is in the warehouse of ``con`` (asked of the catalog: a
    query of a missing table would look for a Python variable of its name)."""
    schema, name = table.split(".")
    found = con.execute(
        "select count(*) from duckdb_tables() where schema_name = ? and table_name = ?",
        [schema, name],
    ).fetchone()
    return found[0] > 0


def last_invocation(con: Any) -> str | None:
    """The invocation id of the last dbt command that started on the warehouse of ``con``."""
    if not exists(con, INVOCATIONS):
        return None
    row = con.execute(
        f"select invocation_id from {INVOCATIONS} order by seq desc limit 1"
    ).fetchone()
    return row[0] if row else None


def _outputs(con: Any) -> str:
    relations = con.execute(
        "select schema_name, table_name, estimated_size, column_count from duckdb_tables() "
        "where schema_name != 'raw' and not internal "
        "and not (schema_name = 'dbt_state' and list_contains(?, table_name)) "
        "union all select schema_name, view_name, null, null from duckdb_views() "
        "where not internal order by all",
        [list(_BOOKKEEPING)],
    ).fetchall()
    return hashlib.sha256(repr(relations).encode()).hexdigest()


def outputs_digest(warehouse: Path) -> str:
    """The relations the build left outside the raw schema, with their row counts (what
    DuckDB keeps in its catalog; no table is scanned)."""
    from ableaudit.warehouse import connect

    con = connect(warehouse, read_only=True)
    try:
        return _outputs(con)
    finally:
        con.close()


def _file_key(path: Path, warehouse: Path) -> list[Any] | None:
    """A file the build left, by its path relative to the warehouse's folder: a warehouse
    moved or copied elsewhere names the files beside it, never those of the old folder."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return [
        os.path.relpath(path.resolve(), warehouse.resolve().parent),
        stat.st_size,
        stat.st_mtime_ns,
    ]


def kept_path(warehouse: Path, key: list[Any]) -> Path:
    """Where the file a stamp recorded (``_file_key``) is, for ``warehouse`` where it is now."""
    return Path(os.path.normpath(warehouse.resolve().parent / key[0]))


def project_inputs(vars: str | None) -> dict[str, Any]:
    """The digests of ``PROJECT_CHECK_INPUTS`` for a build with ``vars``: every input but the
    raw layer."""
    return {
        "project": project_digest(),
        "libraries": libraries_digest(),
        "settings": settings_digest(vars),
    }


def inputs(warehouse: Path, vars: str | None) -> dict[str, Any]:
    """The digest of each input of a build of ``warehouse`` with ``vars``, and of each raw
    table (``raw_tables``)."""
    tables = raw_table_digests(warehouse)
    return {
        **project_inputs(vars),
        "raw": raw_digest(warehouse, tables),
        "raw_tables": tables,
    }


def last_stamp(warehouse: Path) -> dict[str, Any] | None:
    """The stamp of the last build of ``warehouse`` that succeeded, or None: none when the file
    holds none (a new file, one never built by `ableaudit build`), or when another dbt command
    ran on it since that build (other vars, a selection, a seed, one stopped midway)."""
    from ableaudit.warehouse import connect

    if not warehouse.is_file():
        return None
    con = connect(warehouse, read_only=True)
    try:
        if not exists(con, STAMP):
            return None
        row = con.execute(f"select invocation_id, stamp from {STAMP}").fetchone()
        last = last_invocation(con)
    finally:
        con.close()
    if row is None or row[0] is None or row[0] != last:
        return None
    try:
        stamp = json.loads(row[1])
    except ValueError:
        return None
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("inputs"), dict) else None


PROJECT_CHECK_INPUTS = ("project", "libraries", "settings")
"""The inputs that decide the project-only checks (unit tests, data tests of seeds): every
input but the raw layer."""


def project_checks_passed(stamp: Mapping[str, Any] | None, current: Mapping[str, Any]) -> bool:
    """Whether the last build that succeeded ran on the same project, libraries and settings
    as ``current``: its unit tests and the data tests that read no landed row passed then and
    would pass again, and its seeds, views and models that read no landed row would be built
    the same, whatever landed since (selectors.yml: ``project_only_nodes``)."""
    if stamp is None:
        return False
    return all(stamp["inputs"].get(k) == current.get(k) for k in PROJECT_CHECK_INPUTS)


def changed_raw_tables(
    stamp: Mapping[str, Any] | None, current: Mapping[str, Any]
) -> frozenset[str] | None:
    """The raw tables whose rows or definition differ from those the last build that succeeded
    read (new and gone ones too); None when that build recorded none."""
    before = (stamp or {}).get("inputs", {}).get("raw_tables")
    now = current.get("raw_tables")
    if not isinstance(before, dict) or not isinstance(now, dict):
        return None
    return frozenset(t for t in before.keys() | now.keys() if before.get(t) != now.get(t))


def unchanged(
    warehouse: Path,
    stamp: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    all_tests: bool,
    storage_version: str | None,
) -> Mapping[str, Any] | None:
    """``stamp`` (``last_stamp``) when the last build read the same inputs, its data tests
    covered what this build would run, and what it left is still in place; else None."""
    if stamp is None or stamp.get("inputs") != dict(current):
        return None
    if all_tests and not stamp.get("all_tests"):
        return None
    if not stamp.get("gate_tests", True):
        return None
    if stamp.get("storage_version") != storage_version:
        return None
    for kept in ("published", "report"):
        recorded = stamp.get(kept)
        if not recorded or _file_key(kept_path(warehouse, recorded), warehouse) != recorded:
            return None
    if stamp.get("outputs") != outputs_digest(warehouse):
        return None
    return stamp


def record(
    warehouse: Path,
    current: Mapping[str, Any],
    all_tests: bool,
    storage_version: str | None,
    published: Path,
    report: Path,
    invocation_id: str | None,
    gate_tests: bool = True,
) -> bool:
    """Write the stamp of a build that succeeded into the warehouse, tied to the dbt
    invocation that built it (``invocation_id``; None: the last one recorded). When another
    dbt command ran on the warehouse since, nothing is written (the next build runs in full);
    False then. ``gate_tests`` False: the build left out the gate_rule tests (the audit
    flow's, whose release gate reads gate_results after the publish), so no build is ever
    skipped on its stamp."""
    from ableaudit.warehouse import connect

    con = connect(warehouse)
    try:
        last = last_invocation(con)
        if last is None or (invocation_id is not None and last != invocation_id):
            con.execute(f"drop table if exists {STAMP}")
            return False
        stamp = {
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "inputs": dict(current),
            "all_tests": all_tests,
            "gate_tests": gate_tests,
            "storage_version": storage_version,
            "outputs": _outputs(con),
            "published": _file_key(published, warehouse),
            "report": _file_key(report, warehouse),
        }
        con.execute(
            f"create or replace table {STAMP} as select ? as invocation_id, ? as stamp",
            [last, json.dumps(stamp)],
        )
    finally:
        con.close()
    return True


def carry(warehouse: Path, stamped: str, invocation_id: str) -> bool:
    """Tie the stamp of the build ``stamped`` (its invocation id) to ``invocation_id``, a dbt
    command that ran next on the project, libraries and settings of that build and succeeded
    (the caller checks them): the nodes it built are what that build's settings make of the
    raw rows, so what the stamp says of the others still holds. Nothing is written when the
    warehouse holds another stamp, or when another dbt command ran between the two; False
    then."""
    from ableaudit.warehouse import connect

    con = connect(warehouse)
    try:
        if not exists(con, STAMP) or not exists(con, INVOCATIONS):
            return False
        last = [
            i
            for (i,) in con.execute(
                f"select invocation_id from {INVOCATIONS} order by seq desc limit 2"
            ).fetchall()
        ]
        if last != [invocation_id, stamped]:
            return False
        moved = con.execute(
            f"update {STAMP} set invocation_id = ? where invocation_id = ? returning 1",
            [invocation_id, stamped],
        ).fetchall()
    finally:
        con.close()
    return bool(moved)


def stamped_invocation(warehouse: Path) -> str | None:
    """The invocation id of the build whose stamp holds now (``last_stamp``), or None."""
    from ableaudit.warehouse import connect

    if last_stamp(warehouse) is None:
        return None
    con = connect(warehouse, read_only=True)
    try:
        return last_invocation(con)
    finally:
        con.close()


def forget(warehouse: Path) -> None:
    """Drop the stamp (before a build starts: a failed build must not leave one behind)."""
    from ableaudit.warehouse import connect

    if not warehouse.is_file():
        return
    con = connect(warehouse)
    try:
        con.execute(f"drop table if exists {STAMP}")
    finally:
        con.close()
