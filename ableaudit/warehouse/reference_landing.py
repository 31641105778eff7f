"""Reference data landed in raw.*: query sets, image sets, human ratings, adapters.

Each is validated by its ingest module (or the adapter registry) first and written here,
under the landing layer's rules (``ableaudit.warehouse.landing``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ableaudit.warehouse import raw_schema
from ableaudit.warehouse.landing import _arrow, _landing_for, _settle, writing


class RegistryError(ValueError):
    """An adapter cannot be found or registered; the message says what to do (raised here
    when a name is taken by another kind, and by ``ableaudit.adapters.registry``)."""


def replace_query_set(
    warehouse: str | Path | None,
    query_set: str,
    rows: Sequence[dict[str, Any]],
    source_file: str | None,
) -> int:
    """Make ``raw.external_queries`` hold exactly ``rows`` for ``query_set`` (validated by the caller).

    A landed row equal to an incoming one stays as it is (with the landing that wrote it), so
    loading the same file again writes nothing; the rest of the set is replaced.
    """
    columns = raw_schema.table("external_queries").arrow_columns()
    same = " and ".join(f"e.{c} is not distinct from i.{c}" for c in columns if c != "landing_id")
    with writing(warehouse) as con:
        landing_id, own = _landing_for(
            con, "import-queries", source_file or f"query set {query_set}"
        )
        batch = [{**r, "query_set": query_set, "source_file": source_file} for r in rows]
        con.register("incoming_queries", _arrow(batch, columns, landing_id))
        con.execute(
            "delete from raw.external_queries e where e.query_set = ? "
            f"and not exists (select 1 from incoming_queries i where {same})",
            [query_set],
        )
        cols = ", ".join(columns)
        con.execute(
            f"insert into raw.external_queries ({cols}) select {cols} from incoming_queries i "
            "where not exists (select 1 from raw.external_queries e "
            f"where e.query_set = ? and {same})",
            [query_set],
        )
        _settle(con, landing_id, own)
    return len(rows)


def replace_images(
    warehouse: str | Path | None,
    image_set: str,
    rows: Sequence[dict[str, Any]],
    stale_ids: Sequence[str],
    candidates: Sequence[dict[str, Any]] | None = None,
) -> None:
    """Remove ``stale_ids`` of ``image_set`` and insert ``rows`` (validated by the caller); with
    ``candidates``, make them the set's raw.image_candidates in the same transaction."""
    images = raw_schema.table("images").arrow_columns()
    with writing(warehouse) as con:
        landing_id, own = _landing_for(con, "images", f"image set {image_set}")
        if candidates is not None:
            con.execute("delete from raw.image_candidates where image_set = ?", [image_set])
            columns = raw_schema.table("image_candidates").arrow_columns()
            con.register("incoming_candidates", _arrow(candidates, columns, landing_id))
            cols = ", ".join(columns)
            con.execute(
                f"insert into raw.image_candidates ({cols}) select {cols} from incoming_candidates"
            )
        if stale_ids:
            con.executemany(
                "delete from raw.images where image_set = ? and image_id = ?",
                [[image_set, i] for i in stale_ids],
            )
        if rows:
            con.register("incoming_images", _arrow(rows, images, landing_id))
            cols = ", ".join(images)
            con.execute(f"insert into raw.images ({cols}) select {cols} from incoming_images")
        _settle(con, landing_id, own)


def land_annotations(
    warehouse: str | Path | None, rows: Sequence[dict[str, Any]]
) -> tuple[int, int, list[dict]]:
    """Insert new ratings and update changed ones; returns (inserted, unchanged, replaced) where
    ``replaced`` lists each changed rating with its old and new value."""
    columns = raw_schema.table("annotations").arrow_columns()
    with writing(warehouse) as con:
        files = {r.get("source_file") for r in rows}
        source = files.pop() if len(files) == 1 else None
        landing_id, own = _landing_for(con, "import-annotations", source)
        con.register("annotation_incoming", _arrow(rows, columns, landing_id))
        existing = dict(
            con.execute(
                "select a.annotation_id, a.value from raw.annotations a "
                "inner join annotation_incoming i on i.annotation_id = a.annotation_id"
            ).fetchall()
        )
        new = [r["annotation_id"] for r in rows if r["annotation_id"] not in existing]
        changed = [
            r
            for r in rows
            if r["annotation_id"] in existing and existing[r["annotation_id"]] != r["value"]
        ]
        if new:
            con.execute(
                "insert into raw.annotations by name "
                "select i.*, current_timestamp as loaded_at from annotation_incoming i "
                "where i.annotation_id in (select unnest(?::varchar[]))",
                [new],
            )
        if changed:
            con.execute(
                "update raw.annotations as a set value = i.value, value_num = i.value_num, "
                "batch_id = i.batch_id, source_file = i.source_file, loaded_at = current_timestamp, "
                "landing_id = i.landing_id "
                "from annotation_incoming i where a.annotation_id = i.annotation_id "
                "and a.annotation_id in (select unnest(?::varchar[]))",
                [[r["annotation_id"] for r in changed]],
            )
        _settle(con, landing_id, own)
    replaced = [
        {
            "item_id": r["item_id"],
            "dimension": r["dimension"],
            "annotator_id": r["annotator_id"],
            "old_value": existing[r["annotation_id"]],
            "new_value": r["value"],
        }
        for r in changed
    ]
    return len(new), len(rows) - len(new) - len(changed), replaced


def add_adapter(
    warehouse: str | Path | None,
    name: str,
    kind: str,
    place: Callable[[int], tuple[dict[str, Any], Callable[[], None]]],
) -> dict[str, Any]:
    """Register the next version of adapter ``name``: ``place(version)`` puts its files in
    place and returns its row and how to undo that; the row lands in the same transaction,
    and a failure undoes the placing. Returns the row as landed (with ``created_at``)."""
    undo: Callable[[], None] | None = None
    try:
        with writing(warehouse) as con:
            kinds = {
                k
                for (k,) in con.execute(
                    "select distinct kind from raw.adapters where name = ?", [name]
                ).fetchall()
            }
            if kinds - {kind}:
                raise RegistryError(
                    f"adapter name {name!r} is already used by a {sorted(kinds)[0]} adapter; "
                    "choose another name"
                )
            (latest,) = con.execute(
                "select coalesce(max(version), 0) from raw.adapters where name = ?", [name]
            ).fetchone()
            row, undo = place(int(latest) + 1)
            landing_id, own = _landing_for(con, "adapter", str(row.get("path")))
            cols = [c.name for c in raw_schema.table("adapters").written()]
            con.execute(
                f"insert into raw.adapters ({', '.join(cols)}) values ({', '.join('?' * len(cols))})",
                [landing_id if c == "landing_id" else row.get(c) for c in cols],
            )
            _settle(con, landing_id, own)
            (created,) = con.execute(
                "select created_at from raw.adapters where adapter_id = ?", [row["adapter_id"]]
            ).fetchone()
    except BaseException:
        if undo is not None:
            undo()
        raise
    return {**row, "created_at": created}
