"""Build the prompts a step reads only when what they are built from changed.

An import checks its rows against ``int_prompts``, and an audit asks its targets
the prompts of ``int_prompts`` or ``int_vision_prompts``: both need the seeds
loaded and the prompt table built (`dbt build --select resource_type:seed
+<table>`), a minute or more of dbt. A stamp beside the warehouse
(``<warehouse>.prompts.json``) records, per prompt table, a digest of what it
was built from (the project's seeds, models and macros, this version, and the
query sets and images landed in the warehouse) and of what the build gave (the
table and the disability seed). When both are unchanged the build is skipped.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import duckdb

from ableaudit import PROJECT_ROOT, __version__

PROMPT_INPUTS = ("dbt_project.yml", "profiles.yml", "seeds", "models", "macros", "python_models")
"""What `dbt build --select +<prompt table>` reads from the project (all of models and
macros, to be safe)."""

RAW_INPUTS = ("external_queries", "images")
"""The raw tables the prompt tables read: landed query sets, landed images."""


def stamp_path(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name + ".prompts.json")


def _digest(con: duckdb.DuckDBPyConnection, relation: str) -> list[tuple]:
    return con.execute(f"select count(*), coalesce(sum(hash(t)), 0) from {relation} t").fetchall()


def prompt_inputs(warehouse: Path, project: Path = PROJECT_ROOT) -> str:
    """A digest of what the prompts are built from."""
    from ableaudit.dbt.build_stamp import digest_files
    from ableaudit.warehouse import connect

    digest = hashlib.sha256(__version__.encode())
    for name in PROMPT_INPUTS:
        root = project / name
        digest_files(digest, project, root.rglob("*") if root.is_dir() else [root])
    con = connect(warehouse)  # the writer: it creates the raw layer of a new warehouse
    try:
        digest.update(repr([_digest(con, f"raw.{t}") for t in RAW_INPUTS]).encode())
    finally:
        con.close()
    return digest.hexdigest()


def prompt_outputs(warehouse: Path, table: str) -> str | None:
    """A digest of the prompt table and the disabilities the warehouse holds; None when missing."""
    from ableaudit.warehouse import connect

    con = connect(warehouse, read_only=True)
    try:
        return repr([_digest(con, f"main.{t}") for t in (table, "stg_seeds__disabilities")])
    except duckdb.CatalogException:
        return None
    finally:
        con.close()


def ensure_prompts(
    warehouse: str | Path, table: str = "int_prompts", project: Path = PROJECT_ROOT
) -> bool:
    """Load the seeds and build ``table`` and what it reads, unless the stamp says the
    warehouse holds it as built from the same inputs. Returns whether dbt ran."""
    from ableaudit.dbt.selected import build_selected

    warehouse = Path(warehouse)
    path = stamp_path(warehouse)
    inputs = prompt_inputs(warehouse, project)
    try:
        stamp = json.loads(path.read_text())
    except (OSError, ValueError):
        stamp = {}
    stamp = stamp if isinstance(stamp, dict) else {}
    outputs = prompt_outputs(warehouse, table)
    if outputs is not None and stamp.get(table) == {"inputs": inputs, "outputs": outputs}:
        return False
    # every seed, and the table with what it reads, in one invocation: dbt's own start (the
    # manifest read and written, the adapter opened) is paid once, not twice
    build_selected(warehouse, ["resource_type:seed", f"+{table}"])
    stamp[table] = {"inputs": inputs, "outputs": prompt_outputs(warehouse, table)}
    try:
        path.write_text(json.dumps(stamp))
    except OSError:
        pass  # a folder we cannot write: the next step builds them again
    return True
