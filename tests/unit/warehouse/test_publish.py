"""The published copy on a small hand-made warehouse (no dbt): its storage format, plain
tables only, no stored config, Parquet per warehouse, and the temporaries of killed publishes."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from ableaudit.cli.main import main as cli
from ableaudit.warehouse import connect
from ableaudit.warehouse import publish as publish_module
from ableaudit.warehouse.publish import mart_names, parquet_folder, publish
from ableaudit.warehouse.publishing import catalog as publish_catalog
from ableaudit.warehouse.publishing import fingerprints as fingerprints_module
from ableaudit.warehouse.publishing import rows as publish_rows
from ableaudit.warehouse.publishing import standby as publish_standby
from ableaudit.warehouse.publishing import views as publish_views

MARKER = "config-marker-51c2"
STANDBY = ".ableaudit.standby.duckdb"  # beside the copy of a warehouse ableaudit.duckdb
# DuckDB's storage numbers (the file header) of the formats asked for
STORAGE_NUMBER = {"v1.1.0": 64, "v1.2.0": 65, "v1.4.0": 67}


def storage_number(path: Path) -> int:
    """The storage version a DuckDB file declares in its header (after an 8-byte checksum and 'DUCK')."""
    head = path.read_bytes()[:20]
    assert head[8:12] == b"DUCK", head
    return struct.unpack("<Q", head[12:20])[0]


def make_warehouse(path: Path, label: str = "a") -> Path:
    """Every mart as a small table, a view on one, a view that needs a Python UDF, and stored configs."""
    connect(path).close()  # the raw layer
    con = duckdb.connect(str(path))
    for mart in mart_names():
        con.execute(f'create table "{mart}" as select 1 as n')
    con.execute("drop table degradation")
    # sum() of integers is a HUGEINT, as in several marts
    con.execute(
        f"create table degradation as select '{label}' as label, x % 2 as arm, sum(x) as n_outcome "
        "from range(7) t(x) group by all"
    )
    con.execute(
        "create view degradation_overall as select label, sum(n_outcome) as n from degradation group by label"
    )
    con.create_function(
        "shout", lambda s: s.upper(), [duckdb.sqltype("VARCHAR")], duckdb.sqltype("VARCHAR")
    )
    con.execute("create view needs_udf as select shout(label) as loud from degradation")
    con.execute(
        "insert into raw.runs (run_id, config_json, status) values ('r1', ?, 'completed')",
        [json.dumps({"targets": [{"name": "m", "api_key_env": MARKER}]})],
    )
    con.execute(
        "insert into raw.adapters (adapter_id, kind, name, version, base_model, path, data_snapshot, params_json) "
        "values ('dpo-v1', 'dpo', 'dpo', 1, 'builtin:tiny', 'adapters/dpo-v1', '{}', ?)",
        [json.dumps({"lr": 1e-4, "note": MARKER})],
    )
    con.close()
    return path


@pytest.fixture
def warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(publish_module.STORAGE_VERSION_ENV, raising=False)
    return make_warehouse(tmp_path / "ableaudit.duckdb")


def read(path: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_copy_is_plain_tables_in_the_default_storage_version(warehouse, tmp_path):
    out = publish(warehouse, tmp_path / "published")
    assert out == tmp_path / "published" / "ableaudit.duckdb"
    assert storage_number(out) == STORAGE_NUMBER[publish_module.DEFAULT_STORAGE_VERSION] == 64
    assert read(out, "select count(*) from duckdb_views() where not internal") == [(0,)]
    kinds = dict(
        read(
            out,
            "select table_schema || '.' || table_name, table_type from information_schema.tables",
        )
    )
    assert set(kinds.values()) == {"BASE TABLE"}
    assert {f"main.{m}" for m in mart_names()} | {
        "main.degradation_overall",
        "raw.generations",
        "publish.relations",
    } <= set(kinds)
    # the view was materialised with its rows
    assert read(out, "select label, n from degradation_overall") == [("a", sum(range(7)))]
    manifest = {
        (s, n): (k, p, rows)
        for s, n, k, p, rows in read(
            out,
            "select schema_name, relation_name, kind_in_warehouse, published, n_rows from publish.relations",
        )
    }
    assert manifest[("main", "degradation_overall")] == ("view", True, 1)
    assert manifest[("main", "degradation")] == ("table", True, 2)
    assert read(out, "select distinct storage_version from publish.relations") == [("v1.1.0",)]


def test_a_view_that_needs_the_projects_code_is_left_out_and_said_so(warehouse, tmp_path, caplog):
    out = publish(warehouse, tmp_path / "published")
    assert ("main", "needs_udf") not in read(
        out, "select table_schema, table_name from information_schema.tables"
    )
    [(published, note)] = read(
        out, "select published, note from publish.relations where relation_name = 'needs_udf'"
    )
    assert not published and "shout" in note
    assert any("needs_udf" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_stored_configs_never_reach_the_copy(warehouse, tmp_path):
    out = publish(warehouse, tmp_path / "published")
    columns = read(
        out,
        "select table_schema, table_name, column_name, data_type from information_schema.columns "
        "where table_schema <> 'publish'",
    )
    assert not [c for c in columns if c[2] in ("config_json", "params_json")]
    assert read(out, "select run_id, status from raw.runs") == [("r1", "completed")]
    assert read(out, "select adapter_id from raw.adapters") == [("dpo-v1",)]
    con = duckdb.connect(str(out), read_only=True)
    leaks = [
        f"{s}.{t}.{c}"
        for s, t, c, ty in columns
        if ty == "VARCHAR"
        and con.execute(
            f'select count(*) from "{s}"."{t}" where "{c}" like ?', [f"%{MARKER}%"]
        ).fetchone()[0]
    ]
    con.close()
    assert leaks == []
    withheld = dict(
        read(
            out,
            "select relation_name, withheld_columns from publish.relations where schema_name = 'raw' "
            "and withheld_columns is not null",
        )
    )
    assert withheld == {
        "runs": "config_json",
        "adapters": "params_json",
        "queryset_builds": "config_json",
    }


def test_storage_version_from_argument_environment_and_cli(warehouse, tmp_path, monkeypatch):
    assert storage_number(publish(warehouse, tmp_path / "arg", storage_version="v1.4.0")) == 67
    monkeypatch.setenv(publish_module.STORAGE_VERSION_ENV, "v1.4.0")
    assert storage_number(publish(warehouse, tmp_path / "env")) == 67
    assert (
        storage_number(publish(warehouse, tmp_path / "both", storage_version="1.2.0")) == 65
    )  # the argument wins
    monkeypatch.delenv(publish_module.STORAGE_VERSION_ENV)
    assert cli(["publish", "--warehouse", str(warehouse), "--storage-version", "v1.2.0"]) == 0
    assert storage_number(warehouse.parent / "published" / "ableaudit.duckdb") == 65


def test_unknown_storage_version_is_one_clear_error_and_writes_nothing(warehouse, tmp_path, capsys):
    out = tmp_path / "published"
    with pytest.raises(
        ValueError, match=r"storage version 'v9\.9\.9'.*ABLEAUDIT_PUBLISH_STORAGE_VERSION"
    ):
        publish(warehouse, out, storage_version="v9.9.9")
    assert [p.name for p in out.rglob("*") if p.is_file()] == []
    assert cli(["publish", "--warehouse", str(warehouse), "--storage-version", "bogus"]) == 2
    assert "storage version 'bogus'" in capsys.readouterr().err


def test_parquet_goes_to_a_folder_per_warehouse(tmp_path, monkeypatch):
    monkeypatch.delenv(publish_module.STORAGE_VERSION_ENV, raising=False)
    out = tmp_path / "published"
    a = make_warehouse(tmp_path / "a" / "first.duckdb", label="first")
    b = make_warehouse(tmp_path / "b" / "second.duckdb", label="second")
    publish(a, out)
    publish(b, out)
    assert {p.name for p in out.iterdir()} == {"first.duckdb", "first", "second.duckdb", "second"}
    for name in ("first", "second"):
        folder = out / name / "parquet"
        assert {p.name for p in folder.iterdir()} == {f"{m}.parquet" for m in mart_names()}
        rows = read(a, f"select distinct label from '{folder / 'degradation.parquet'}'")
        assert rows == [(name,)]
        # a HUGEINT count stays an exact integer in Parquet (DuckDB would write a DOUBLE)
        types = dict(
            read(
                a,
                f"select column_name, column_type from (describe select * from '{folder / 'degradation.parquet'}')",
            )
        )
        assert types["n_outcome"] == "BIGINT"
        assert sorted(
            read(a, f"select arm, n_outcome from '{folder / 'degradation.parquet'}'")
        ) == [(0, 12), (1, 9)]


def test_temporaries_of_killed_publishes_are_removed_and_a_running_ones_kept(warehouse, tmp_path):
    out = tmp_path / "published"
    parquet = out / "ableaudit" / "parquet"
    parquet.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(1.5)  # the running process is older than the file its publish writes now
        gone = [
            out / f".ableaudit.{dead.pid}.tmp.duckdb",
            out / f".ableaudit.{dead.pid}.tmp.duckdb.wal",
            out / f".other.{dead.pid}.tmp.duckdb",
            parquet / f".degradation.{dead.pid}.tmp.parquet",
            parquet / f".refusal_rates.{running.pid}.tmp.parquet",
        ]
        kept = [
            out / f".ableaudit.{running.pid}.tmp.duckdb",
            parquet / f".degradation.{running.pid}.tmp.parquet",
            out / "notes.txt",
            out / ".ableaudit.duckdb.backup",
        ]
        for path in gone + kept:
            path.write_bytes(b"partial")
        # the pid now names a process started after this file was last written: a reused pid
        hour_ago = time.time() - 3600
        os.utime(parquet / f".refusal_rates.{running.pid}.tmp.parquet", (hour_ago, hour_ago))
        publish(warehouse, out)
        assert [p for p in gone if p.exists()] == []
        assert [p for p in kept if not p.exists()] == []
    finally:
        running.kill()
        running.wait()


def test_a_missing_mart_is_an_error_and_nothing_is_written(warehouse, tmp_path):
    con = duckdb.connect(str(warehouse))
    con.execute("drop table data_quality")
    con.close()
    out = tmp_path / "published"
    with pytest.raises(
        RuntimeError, match=r"marts \['data_quality'\] are not tables.*ableaudit build"
    ):
        publish(warehouse, out)
    assert [p for p in out.rglob("*") if p.is_file()] == []


def test_extra_relations_are_exported_and_required(warehouse, tmp_path, monkeypatch):
    monkeypatch.setattr(
        publish_module, "EXTRA_RELATIONS", ("degradation_overall", "raw.generations")
    )
    publish(warehouse, tmp_path / "published")
    folder = tmp_path / "published" / "ableaudit" / "parquet"
    assert (folder / "degradation_overall.parquet").is_file() and (
        folder / "raw.generations.parquet"
    ).is_file()
    monkeypatch.setattr(publish_module, "EXTRA_RELATIONS", ("main.pair_export",))
    with pytest.raises(RuntimeError, match=r"main\.pair_export"):
        publish(warehouse, tmp_path / "again")


def test_the_bookkeeping_of_incremental_builds_stays_in_the_warehouse(warehouse, tmp_path):
    con = duckdb.connect(str(warehouse))
    con.execute("create schema dbt_state")
    con.execute("create table dbt_state.incremental_state as select 'int_pairs' as model")
    con.close()
    out = publish(warehouse, tmp_path / "published")
    schemas = {s for (s,) in read(out, "select distinct schema_name from duckdb_tables()")}
    assert "dbt_state" not in schemas and {"main", "raw"} <= schemas
    assert read(out, "select count(*) from publish.relations where schema_name = 'dbt_state'") == [
        (0,)
    ]


def test_publish_runs_under_the_memory_limit_and_spills_into_a_folder_it_removes(
    warehouse, tmp_path, monkeypatch
):
    import tempfile

    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    limits = []
    real = publish_module.apply_memory_limit

    def record(con):
        real(con)
        limits.append(con.execute("select current_setting('memory_limit')").fetchone()[0])
        limits.append(con.execute("select current_setting('temp_directory')").fetchone()[0])

    monkeypatch.setattr(publish_module, "apply_memory_limit", record)
    monkeypatch.setenv("ABLEAUDIT_DUCKDB_MEMORY_LIMIT", "500MB")
    publish(warehouse, tmp_path / "published")
    assert limits[0] == "476.8 MiB" and limits[1].startswith(str(spills / "ableaudit-publish-"))
    assert list(spills.iterdir()) == []  # the spill folder is gone
    monkeypatch.setenv("ABLEAUDIT_DUCKDB_MEMORY_LIMIT", "lots")
    with pytest.raises(ValueError, match="ABLEAUDIT_DUCKDB_MEMORY_LIMIT='lots'"):
        publish(warehouse, tmp_path / "again")
    assert list(spills.iterdir()) == [] and not (tmp_path / "again" / "ableaudit.duckdb").exists()


def _manifest_changes(copy: Path) -> dict[str, str | None]:
    return dict(
        read(
            copy,
            "select schema_name || '.' || relation_name, change from publish.relations",
        )
    )


def _same_rows(live: Path, copy: Path, relation: str) -> None:
    assert sorted(read(live, f"select * from {relation}"), key=repr) == sorted(
        read(copy, f"select * from {relation}"), key=repr
    )


def test_a_second_publish_updates_the_previous_copy_where_the_warehouse_changed(
    warehouse, tmp_path
):
    """Only what changed is written again: rows added, removed and changed (duplicates
    counted), a relation whose columns changed written whole, a relation gone dropped; the
    rest, and the Parquet files of unchanged marts, left as they are."""
    out = tmp_path / "published"
    con = duckdb.connect(str(warehouse))
    con.execute(
        "create table extra as select x % 10 as k, 'v' || (x % 10) as v from range(30) t(x)"
    )
    con.execute("create view extra_view as select * from extra where k < 8")
    con.execute("create table doomed as select 1 as n")
    con.close()
    copy = publish(warehouse, out)
    assert set(_manifest_changes(copy).values()) == {"written", None}  # None: left out
    parquet = parquet_folder(copy)
    kept_marts = [m for m in mart_names() if m != "degradation"]
    before = {m: (parquet / f"{m}.parquet").stat().st_mtime_ns for m in kept_marts}

    con = duckdb.connect(str(warehouse))
    con.execute("insert into degradation values ('a', 2, 5)")  # one row more
    con.execute("update degradation set n_outcome = n_outcome + 1 where arm = 0")  # one changed
    con.execute("delete from extra where k = 2 and rowid < 20")  # duplicates, fewer of them
    con.execute("insert into extra values (1, 'v1')")  # and one more of a duplicate
    con.execute("drop table doomed")
    con.execute(f'alter table "{kept_marts[0]}" add column m integer default 7')
    con.close()
    time.sleep(0.01)
    again = publish(warehouse, out)
    changes = _manifest_changes(again)
    assert changes["main.degradation"] == changes["main.extra"] == "updated"
    assert changes["main.extra_view"] == "updated"  # a view over a changed table
    # its one row changed: more than half of it, so written whole
    assert changes["main.degradation_overall"] == "written"
    assert changes[f"main.{kept_marts[0]}"] == "written"
    assert changes["raw.generations"] == changes[f"main.{kept_marts[1]}"] == "unchanged"
    assert "main.doomed" not in changes
    tables = {t for (t,) in read(again, "select table_name from information_schema.tables")}
    assert "doomed" not in tables
    for relation in (
        "degradation",
        "degradation_overall",
        "extra",
        "extra_view",
        kept_marts[0],
        kept_marts[1],
    ):
        _same_rows(warehouse, again, relation)
    # still in the storage version DuckDB 1.1 reads, and nothing else to compact
    assert storage_number(again) == 64
    assert not list(out.glob(".*tmp*"))
    # the Parquet files: the changed marts' written again, the others kept
    after = {m: (parquet / f"{m}.parquet").stat().st_mtime_ns for m in kept_marts}
    assert after[kept_marts[0]] > before[kept_marts[0]]
    assert {m: after[m] for m in kept_marts[1:]} == {m: before[m] for m in kept_marts[1:]}
    assert sorted(
        read(warehouse, f"select arm, n_outcome from '{parquet / 'degradation.parquet'}'")
    ) == [
        (0, 13),
        (1, 9),
        (2, 5),
    ]


@pytest.mark.parametrize(
    ("copied", "live"),
    [
        ([1, 2, 3, 4], [1, 2, 3, 4]),  # the same
        ([1, 2, 3, 4], [1, 2, 5, 6, 7]),  # rows gone, rows new
        ([1, 1, 2, 3], [1, 2, 3]),  # a duplicate fewer
        ([1, 2, 3], [1, 2, 2, 3, 9]),  # a duplicate more, and a new row
        ([1, 1, 2, 2], [2, 2, 2, 1]),  # counts swapped between two rows held on both sides
        ([], [4, 4]),
        ([5], []),
    ],
)
def test_the_changed_hashes_are_those_whose_counts_differ(copied, live):
    """Checked against counting each side in Python: the anti joins alone, or the count of
    every hash when a row is held on both sides a different number of times."""
    from collections import Counter

    con = duckdb.connect()
    con.execute("create temp table publish_live (h ubigint)")
    con.execute("create temp table publish_copied (rid bigint, h ubigint)")
    for x in live:
        con.execute("insert into publish_live values (hash(?))", [x])
    for i, x in enumerate(copied):
        con.execute("insert into publish_copied values (?, hash(?))", [i, x])
    publish_rows.changed_hashes(con)
    got = {h for (h,) in con.execute("select h from publish_changed").fetchall()}
    counts_live, counts_copied = Counter(live), Counter(copied)
    differing = [x for x in counts_live | counts_copied if counts_live[x] != counts_copied[x]]
    expected = {h for ((h,),) in (con.execute("select hash(?)", [x]).fetchall() for x in differing)}
    assert got == expected


def test_a_relation_whose_rows_mostly_changed_is_written_whole(warehouse, tmp_path):
    """Row by row, or model by model: a model whose rows are most of the relation."""
    out = tmp_path / "published"
    con = duckdb.connect(str(warehouse))
    con.execute("create table extra as select x as k, 'v' as v from range(10) t(x)")
    con.execute("create table scored as select 'big' as model_id, x as k from range(8) t(x)")
    con.execute("insert into scored values ('small', 0), ('small', 1)")
    con.close()
    publish(warehouse, out)
    con = duckdb.connect(str(warehouse))
    con.execute("update extra set v = 'w' where k < 6")  # 6 of 10 rows
    con.execute("update scored set k = k + 1 where model_id = 'big'")  # 8 of 10 rows
    con.close()
    copy = publish(warehouse, out)
    assert _manifest_changes(copy)["main.extra"] == "written"
    assert _manifest_changes(copy)["main.scored"] == "written"
    assert _recorded(copy, "main.scored") == {"big": 8, "small": 2}
    for relation in ("extra", "scored"):
        _same_rows(warehouse, copy, relation)
    con = duckdb.connect(str(warehouse))
    con.execute("update extra set v = 'x' where k < 5")  # 5 of 10: updated
    con.close()
    _drop_standby(out)  # the standby, one build older, differs in 6 rows: written whole
    copy = publish(warehouse, out)
    assert _manifest_changes(copy)["main.extra"] == "updated"
    _same_rows(warehouse, copy, "extra")


def test_a_stale_parquet_file_of_an_unchanged_mart_is_written_again(warehouse, tmp_path):
    """A publish killed between moving the copy and its Parquet files into place leaves an
    older Parquet file beside a current copy: the next publish sees it and writes it again."""
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    stale = parquet_folder(copy) / "degradation.parquet"
    con = duckdb.connect()
    con.execute(
        f"copy (select 'old' as label, 0 as arm, 1::bigint as n_outcome) to '{stale}' (format parquet)"
    )
    con.close()
    publish(warehouse, out)
    assert _manifest_changes(copy)["main.degradation"] == "unchanged"
    assert sorted(read(warehouse, f"select label, arm, n_outcome from '{stale}'")) == [
        ("a", 0, 12),
        ("a", 1, 9),
    ]


def test_the_copy_records_each_parquet_file_as_it_lies_in_place(warehouse, tmp_path):
    """``publish.parquet_files`` holds each file's size, modification time and inode as they
    are once moved into place; a kept file is not read again, a file put in its place is
    written again."""
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    folder = parquet_folder(copy)

    def recorded() -> dict[str, tuple[int, int, int]]:
        rows = read(
            copy, "select file_name, n_bytes, modified_ns, inode from publish.parquet_files"
        )
        return {name: (n, mtime, inode) for name, n, mtime, inode in rows}

    def on_disk() -> dict[str, tuple[int, int, int]]:
        return {
            p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino)
            for p in folder.glob("*.parquet")
        }

    assert set(recorded()) == {f"{m}.parquet" for m in mart_names()}
    assert recorded() == on_disk()
    # the same bytes under a new inode: not the file the copy recorded, so written again
    target = folder / "degradation.parquet"
    twin = folder / "twin"
    shutil.copy2(target, twin)
    os.replace(twin, target)
    moved = on_disk()
    publish(warehouse, out)
    assert _manifest_changes(copy)["main.degradation"] == "unchanged"
    now = on_disk()
    assert now["degradation.parquet"] != moved["degradation.parquet"]
    assert {k: v for k, v in now.items() if k != "degradation.parquet"} == {
        k: v for k, v in moved.items() if k != "degradation.parquet"
    }
    assert recorded() == now


def test_a_fresh_copy_in_another_storage_version_or_when_half_of_it_is_free(
    warehouse, tmp_path, monkeypatch, caplog
):
    caplog.set_level("INFO", logger=publish_standby.__name__)
    out = tmp_path / "published"
    publish(warehouse, out)
    copy = publish(warehouse, out, storage_version="v1.4.0")
    assert storage_number(copy) == STORAGE_NUMBER["v1.4.0"]
    assert set(_manifest_changes(copy).values()) == {"written", None}
    assert "not v1.4.0" in caplog.text
    assert set(_manifest_changes(publish(warehouse, out, "v1.4.0")).values()) == {"unchanged", None}
    monkeypatch.setattr(publish_standby, "FRESH_COPY_FREE_SHARE", -1.0)
    caplog.clear()
    assert set(_manifest_changes(publish(warehouse, out, "v1.4.0")).values()) == {"written", None}
    assert "blocks are free" in caplog.text


def test_an_unreadable_previous_copy_is_replaced_by_a_fresh_one(warehouse, tmp_path):
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    copy.write_bytes(b"not a database")
    assert set(_manifest_changes(publish(warehouse, out)).values()) == {"written", None}


def _add_model_rows(warehouse: Path) -> None:
    con = duckdb.connect(str(warehouse))
    con.execute(
        "create table scored as select 'm' || (x % 4) as model_id, x % 3 as k, 'text ' || (x % 5) as v "
        "from range(40) t(x)"
    )
    con.execute(
        "insert into scored values (null, 1, 'no model'), ('m1', 0, 'text 0')"
    )  # a duplicate
    con.execute(
        "create view scored_view as select model_id, k, count(*) as n from scored group by all"
    )
    con.close()


def _drop_standby(out: Path) -> None:
    """Remove the standby the last publish kept, so that the next one updates a copy of the
    previous copy (a reader holding the standby open has the same effect)."""
    (out / STANDBY).unlink()


def _recorded(copy: Path, relation: str) -> dict[str | None, int]:
    return dict(
        read(
            copy,
            "select group_value, n_rows from publish.relation_groups "
            f"where schema_name || '.' || relation_name = '{relation}'",
        )
    )


def _held(live: Path, relation: str) -> dict[str | None, int]:
    from collections import Counter

    return dict(Counter(m for (m,) in read(live, f"select model_id from {relation}")))


@pytest.fixture
def row_updates(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The relations the next publishes update row by row."""
    seen: list[str] = []
    update_rows = publish_rows.update_rows

    def spy(con, source, target, *rest):
        seen.append(target.rsplit(".", 1)[1].strip('"'))
        return update_rows(con, source, target, *rest)

    monkeypatch.setattr(publish_rows, "update_rows", spy)
    return seen


def test_a_relation_of_models_is_updated_model_by_model(warehouse, tmp_path, row_updates):
    """A table or view with a model_id: the copy records each model's rows and fingerprint, and
    the next publish replaces only the models whose rows differ (a model added, one changed,
    the rows of no model), reading nothing of the copy but that column."""
    _add_model_rows(warehouse)
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    for relation in ("main.scored", "main.scored_view"):
        assert _recorded(copy, relation) == _held(warehouse, relation)
    assert _recorded(copy, "raw.generations") == {}  # empty: no group
    assert _recorded(copy, "main.degradation") == {}  # no model_id: row by row

    kept_models = (
        "select group_value, hash_sum, hash_xor from publish.relation_groups "
        "where relation_name = 'scored' and group_value in ('m0', 'm1', 'm3') order by 1"
    )
    first = read(copy, kept_models)
    con = duckdb.connect(str(warehouse))
    con.execute("insert into scored values ('m''9', 2, 'new model'), (null, 2, 'no model again')")
    con.execute("update scored set v = 'changed' where model_id = 'm2' and k = 0")
    con.close()
    row_updates.clear()
    copy = publish(warehouse, out)
    changes = _manifest_changes(copy)
    assert changes["main.scored"] == changes["main.scored_view"] == "updated"
    assert "scored" not in row_updates and "scored_view" not in row_updates
    for relation in ("scored", "scored_view"):
        _same_rows(warehouse, copy, relation)
        assert _recorded(copy, f"main.{relation}") == _held(warehouse, relation)
    # the unchanged models' fingerprints are those of the first publish
    assert len(first) == 3 and read(copy, kept_models) == first

    row_updates.clear()
    _drop_standby(out)  # updating a copy of the previous copy, which holds these rows
    assert _manifest_changes(publish(warehouse, out))["main.scored"] == "unchanged"
    assert "scored" not in row_updates


def _scan_filters(plan: dict) -> list[tuple[str, str | None]]:
    """Each table scan of a query plan (``explain (format json)``), with the filter on it."""
    found = []
    info = plan.get("extra_info")
    if isinstance(info, dict) and "Table" in info:
        found.append((info["Table"].rsplit(".", 1)[-1], info.get("Filters")))
    for child in plan.get("children", []):
        found += _scan_filters(child)
    return found


@pytest.mark.parametrize("changed", [["g4"], ["g4", "g9"]])
def test_changed_models_are_read_again_with_their_filter_on_every_scan(
    warehouse, tmp_path, monkeypatch, changed
):
    """A view that joins a per-generation aggregate on generation and model (as
    int_generation_refusals does): when one model changed, or two (a standby copy one publish
    behind), the publish reads those models' rows again with a filter on every scan of both
    tables, not the whole aggregate."""
    con = duckdb.connect(str(warehouse))
    con.execute(
        "create table gens as select 'g' || x as generation_id, 'm' || (x % 10) as model_id "
        "from range(100) t(x)"
    )
    con.execute(
        "create table flags as select 'g' || x as generation_id, 'm' || (x % 10) as model_id, "
        "x % 2 = 0 as refused from range(100) t(x)"
    )
    con.execute(
        """
        create view refusals as
        with per_generation as (
            select generation_id, model_id, bool_or(refused) as refused
            from flags group by generation_id, model_id
        )
        select gens.generation_id, gens.model_id, per_generation.refused
        from gens left join per_generation
            on gens.generation_id = per_generation.generation_id
            and gens.model_id = per_generation.model_id
        """
    )
    con.close()
    out = tmp_path / "published"
    publish(warehouse, out)
    con = duckdb.connect(str(warehouse))
    for generation in changed:
        con.execute("update flags set refused = not refused where generation_id = ?", [generation])
    con.close()
    queries: list[str] = []
    rows_of_groups = publish_rows.rows_of_groups
    monkeypatch.setattr(
        publish_rows,
        "rows_of_groups",
        lambda *args: queries.append(rows_of_groups(*args)) or queries[-1],
    )
    copy = publish(warehouse, out)
    assert _manifest_changes(copy)["main.refusals"] == "updated"
    _same_rows(warehouse, copy, "refusals")
    models = {f"m{int(g[1:]) % 10}" for g in changed}
    (query,) = {q for q in queries if '"refusals"' in q}
    [(_, plan)] = read(warehouse, f"explain (format json) {query}")
    scans = _scan_filters(json.loads(plan)[0])
    assert sorted(t for t, _ in scans) == sorted(["gens", "flags"] * len(models))
    for model in models:  # each model's branch filters both scans on it
        assert sorted(t for t, f in scans if f is not None and model in f) == ["flags", "gens"]


def test_a_copy_that_is_not_what_its_record_says_is_updated_row_by_row(
    warehouse, tmp_path, row_updates
):
    """Rows deleted from the copy behind the publish's back, or fingerprints recorded by another
    DuckDB: the record is not trusted, and the rows are compared one by one."""
    _add_model_rows(warehouse)
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    con = duckdb.connect(str(copy))
    con.execute("delete from scored where model_id = 'm3' and k = 1")
    con.close()
    row_updates.clear()
    copy = publish(warehouse, out)
    assert _manifest_changes(copy)["main.scored"] == "updated"
    assert row_updates.count("scored") == 1 and "scored_view" not in row_updates
    _same_rows(warehouse, copy, "scored")
    assert _recorded(copy, "main.scored") == _held(warehouse, "scored")

    con = duckdb.connect(str(copy))
    con.execute("update publish.relation_groups set duckdb_version = '0.0.1'")
    con.close()
    row_updates.clear()
    _drop_standby(out)  # the copy so edited is the one updated
    copy = publish(warehouse, out)
    assert {"scored", "scored_view"} <= set(row_updates)
    assert _manifest_changes(copy)["main.scored"] == "unchanged"
    assert _recorded(copy, "main.scored") == _held(warehouse, "scored")


def _by_model_files(copy: Path) -> dict[str, tuple[int, int]]:
    """Each file of pair_details' folder: its modification time and inode."""
    folder = parquet_folder(copy) / "pair_details"
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_ino) for p in folder.glob("*.parquet")}


def _rows_of_files(copy: Path) -> list[tuple]:
    folder = parquet_folder(copy) / "pair_details"
    return sorted(read(copy, f"select * from read_parquet('{folder}/*.parquet')"), key=repr)


def test_pair_details_is_a_file_per_model_and_only_changed_models_are_written_again(
    warehouse, tmp_path
):
    """The mart that holds the answers is exported as one Parquet file per model; the next
    publish writes the files of the models whose rows changed or that are new, removes the file
    of a model that is gone, and keeps the others as they lie."""
    models = ["org/model:v1 é", "m1", None, "a" * 300]
    _answers(warehouse, models)
    out = tmp_path / "published"
    old_single = parquet_folder(out / warehouse.name) / "pair_details.parquet"
    old_single.parent.mkdir(parents=True)
    old_single.write_bytes(b"an earlier layout")
    copy = publish(warehouse, out)
    first = _by_model_files(copy)
    names = {publish_module.model_file_name(m): m for m in models}
    assert set(first) == set(names) and len(names) == 4
    assert all(len(n) < 100 for n in names)
    assert not old_single.exists()
    assert _rows_of_files(copy) == sorted(read(copy, "select * from pair_details"), key=repr)
    for name, model in names.items():
        got = read(
            copy, f"select distinct model_id from '{parquet_folder(copy)}/pair_details/{name}'"
        )
        assert got == [(model,)]
    recorded = dict(
        read(
            copy,
            "select file_name, n_bytes from publish.parquet_files where relation_name = 'pair_details'",
        )
    )
    assert set(recorded) == {f"pair_details/{n}" for n in names}

    con = duckdb.connect(str(warehouse))
    con.execute("update pair_details set answer = 'changed' where model_id = 'm1' and k = 0")
    con.execute("delete from pair_details where model_id is null")
    con.execute("insert into pair_details values ('m2', 0, 'new')")
    con.close()
    copy = publish(warehouse, out)
    second = _by_model_files(copy)
    assert _manifest_changes(copy)["main.pair_details"] == "updated"
    assert set(second) == {
        publish_module.model_file_name(m) for m in ("org/model:v1 é", "m1", "m2", "a" * 300)
    }
    for kept in ("org/model:v1 é", "a" * 300):
        name = publish_module.model_file_name(kept)
        assert second[name] == first[name]
    assert (
        second[publish_module.model_file_name("m1")] != first[publish_module.model_file_name("m1")]
    )
    assert _rows_of_files(copy) == sorted(read(warehouse, "select * from pair_details"), key=repr)

    # a file the record does not know: every model's file is written again, the stray removed
    stray = parquet_folder(copy) / "pair_details" / "stray.parquet"
    shutil.copyfile(
        parquet_folder(copy) / "pair_details" / publish_module.model_file_name("m2"), stray
    )
    copy = publish(warehouse, out)
    third = _by_model_files(copy)
    assert not stray.exists() and set(third) == set(second)
    assert all(third[n] != second[n] for n in third)
    assert _rows_of_files(copy) == sorted(read(warehouse, "select * from pair_details"), key=repr)

    # nothing changed: every file kept
    copy = publish(warehouse, out)
    assert _by_model_files(copy) == third


def _answers(warehouse: Path, models: list[str | None]) -> None:
    """pair_details as three answers of each model."""
    con = duckdb.connect(str(warehouse))
    con.execute("drop table pair_details")
    con.execute(
        "create table pair_details as select m.model_id, x as k, 'answer ' || x as answer "
        "from unnest($models) m(model_id), range(3) t(x)",
        {"models": models},
    )
    con.close()


def _edit(warehouse: Path, *statements: str) -> None:
    con = duckdb.connect(str(warehouse))
    for statement in statements:
        con.execute(statement)
    con.close()


def test_the_replaced_copy_is_the_standby_the_next_publish_updates(
    warehouse, tmp_path, monkeypatch
):
    """The copy a publish replaces stays on disk as the standby (the same file, so a reader of
    it reads on), and the next publish updates it with what changed in the last two builds
    instead of copying the whole copy first. Its Parquet files are set against the copy in
    place: a model or mart changed by the last build and changed back by this one is written
    again, one unchanged since the last copy kept."""
    _answers(warehouse, ["m1", "m2", "m3"])
    out = tmp_path / "published"
    first = publish(warehouse, out)
    first_inode = first.stat().st_ino
    assert not (out / STANDBY).exists()

    _edit(
        warehouse,
        "update pair_details set answer = 'changed' where model_id = 'm1' and k = 0",
        "insert into degradation values ('a', 9, 1)",
    )
    second = publish(warehouse, out)
    second_inode = second.stat().st_ino
    assert second_inode != first_inode and (out / STANDBY).stat().st_ino == first_inode
    parquet = parquet_folder(second)
    files = _by_model_files(second)
    untouched = [m for m in mart_names() if m not in ("degradation", "pair_details")][0]
    untouched_file = (parquet / f"{untouched}.parquet").stat().st_mtime_ns
    degradation_file = (parquet / "degradation.parquet").stat().st_mtime_ns

    _edit(
        warehouse,  # the last build's changes undone, and one of this build
        "update pair_details set answer = 'answer 0' where model_id = 'm1' and k = 0",
        "delete from degradation where arm = 9",
        "update pair_details set answer = 'new' where model_id = 'm2' and k = 2",
    )

    def no_copy(*args, **kwargs):
        raise AssertionError("the standby is updated, not a copy of the copy")

    monkeypatch.setattr(publish_module.shutil, "copyfile", no_copy)
    third = publish(warehouse, out)
    monkeypatch.undo()
    assert third.stat().st_ino == first_inode and (out / STANDBY).stat().st_ino == second_inode
    for relation in ("pair_details", "degradation", "degradation_overall", "raw.generations"):
        _same_rows(warehouse, third, relation)
    assert _recorded(third, "main.pair_details") == _held(warehouse, "pair_details")
    assert _manifest_changes(third)["main.pair_details"] == "updated"
    assert _manifest_changes(third)["main.degradation"] == "unchanged"  # as in the standby
    # the Parquet files hold the warehouse's rows: m1 and degradation written back, m3 kept
    now = _by_model_files(third)
    name = publish_module.model_file_name
    assert now[name("m3")] == files[name("m3")]
    assert now[name("m1")] != files[name("m1")] and now[name("m2")] != files[name("m2")]
    assert _rows_of_files(third) == sorted(read(warehouse, "select * from pair_details"), key=repr)
    assert (parquet / "degradation.parquet").stat().st_mtime_ns != degradation_file
    assert sorted(read(warehouse, f"select * from '{parquet / 'degradation.parquet'}'")) == sorted(
        read(warehouse, "select * from degradation")
    )
    assert (parquet / f"{untouched}.parquet").stat().st_mtime_ns == untouched_file
    assert not list(out.glob(".*tmp*"))


def test_a_standby_held_open_by_a_reader_is_left_to_it(warehouse, tmp_path, caplog):
    """A BI client still reading the copy that became the standby: DuckDB's lock refuses the
    writer, and the publish copies the current copy instead; the reader's file is not written."""
    caplog.set_level("INFO", logger=publish_standby.__name__)
    out = tmp_path / "published"
    publish(warehouse, out)
    _edit(warehouse, "insert into degradation values ('a', 9, 1)")
    publish(warehouse, out)
    standby = out / STANDBY
    rows_before = read(standby, "select count(*) from degradation")
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
            "print(con.execute('select count(*) from degradation').fetchone()[0], flush=True); "
            "sys.stdin.read()",
            str(standby),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == str(rows_before[0][0])
        held = os.stat(standby).st_ino
        _edit(warehouse, "insert into degradation values ('a', 10, 1)")
        copy = publish(warehouse, out)
        assert copy.stat().st_ino != held
        _same_rows(warehouse, copy, "degradation")
        assert "rather than updating the copy before it" in caplog.text
        assert "lock" in caplog.text.lower()
    finally:
        reader.communicate("")
    # the reader's file, no longer linked under the standby's name, was left as it was
    assert (out / STANDBY).stat().st_ino != held
    assert not list(out.glob(".*tmp*"))


def test_a_standby_that_is_the_copy_itself_is_not_written(warehouse, tmp_path):
    """A publish killed between keeping the standby and moving the new copy into place leaves
    the standby a second name of the copy: the next publish copies it rather than writing the
    file readers open."""
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    os.link(copy, out / STANDBY)
    kept = tmp_path / "kept.duckdb"
    os.link(copy, kept)
    before = kept.read_bytes()
    _edit(warehouse, "insert into degradation values ('a', 9, 1)")
    again = publish(warehouse, out)
    assert kept.read_bytes() == before
    assert again.stat().st_ino != kept.stat().st_ino
    assert (out / STANDBY).stat().st_ino == kept.stat().st_ino  # the replaced copy
    _same_rows(warehouse, again, "degradation")


def _record_build_fingerprints(warehouse: Path, relation: str, columns: str | None = None) -> None:
    """What a build's incremental model records of itself (macro record_group_fingerprints):
    the fingerprint of each model's rows over every column, and the columns (``columns``
    stands in for other ones)."""
    schema, name = relation.split(".")
    con = duckdb.connect(str(warehouse))
    listed = publish_catalog.relation_columns(con, warehouse.stem, schema, name)
    described = columns or ", ".join(f"{c} {t}" for c, t in listed)
    con.execute(
        "create schema if not exists dbt_state; create table if not exists "
        "dbt_state.group_fingerprints (relation varchar, columns varchar, model_id varchar, "
        "n_rows bigint, hash_sum hugeint, hash_xor ubigint)"
    )
    con.execute("delete from dbt_state.group_fingerprints where relation = ?", [relation])
    hashed = ", ".join(f'"{c}"' for c, _ in listed)
    con.execute(
        "insert into dbt_state.group_fingerprints select $relation, $columns, model_id, count(*), "
        f"sum(h), bit_xor(h) from (select model_id, hash({hashed}) as h from {relation}) "
        "group by model_id",
        {"relation": relation, "columns": described},
    )
    con.close()


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The relations whose groups the next publishes hash (in the warehouse or the copy)."""
    seen: list[str] = []
    fingerprints = fingerprints_module.group_fingerprints

    def spy(con, relation, columns):
        seen.append(relation.rsplit(".", 1)[1].strip('"'))
        return fingerprints(con, relation, columns)

    monkeypatch.setattr(publish_rows, "group_fingerprints", spy)
    return seen


def test_the_fingerprints_a_build_recorded_stand_in_for_hashing_the_relation(
    warehouse, tmp_path, hashed
):
    """A relation whose group fingerprints the build recorded is not hashed by the publish,
    which decides and records its models by them; a record that does not count the rows the
    relation holds per model, or was taken over other columns, is not used."""
    _add_model_rows(warehouse)
    _record_build_fingerprints(warehouse, "main.scored")
    out = tmp_path / "published"
    copy = publish(warehouse, out)
    assert "scored" not in hashed and "scored_view" in hashed
    assert _recorded(copy, "main.scored") == _held(warehouse, "scored")
    assert read(
        copy, "select count(*) from information_schema.schemata where schema_name = 'dbt_state'"
    ) == [(0,)]

    # one model changed, and recorded as a build does: only its rows are replaced
    _edit(warehouse, "update scored set v = 'changed' where model_id = 'm2' and k = 0")
    _record_build_fingerprints(warehouse, "main.scored")
    hashed.clear()
    copy = publish(warehouse, out)
    assert "scored" not in hashed
    assert _manifest_changes(copy)["main.scored"] == "updated"
    _same_rows(warehouse, copy, "scored")

    # rows the record does not count: the relation is hashed
    _edit(warehouse, "insert into scored values ('m3', 9, 'landed by hand')")
    hashed.clear()
    copy = publish(warehouse, out)
    assert "scored" in hashed
    _same_rows(warehouse, copy, "scored")
    assert _recorded(copy, "main.scored") == _held(warehouse, "scored")

    # a record taken over other columns: hashed too
    _edit(warehouse, "update scored set v = 'changed again' where model_id = 'm0'")
    _record_build_fingerprints(warehouse, "main.scored", columns="model_id VARCHAR")
    hashed.clear()
    copy = publish(warehouse, out)
    assert "scored" in hashed
    _same_rows(warehouse, copy, "scored")


def _declare_group_local(warehouse: Path, relation: str) -> None:
    """What a build records of a view that declares its models' rows local (macro
    record_group_local_view): its definition as DuckDB keeps it."""
    schema, name = relation.split(".")
    _edit(
        warehouse,
        "create schema if not exists dbt_state",
        "create table if not exists dbt_state.group_local_views (relation varchar, definition varchar)",
        f"delete from dbt_state.group_local_views where relation = '{relation}'",
        f"insert into dbt_state.group_local_views select '{relation}', sql from duckdb_views() "
        f"where schema_name = '{schema}' and view_name = '{name}'",
    )


@pytest.fixture
def hashed_queries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the next publishes hash group by group: a relation, or a query of some of its groups."""
    seen: list[str] = []
    fingerprints = fingerprints_module.group_fingerprints

    def spy(con, relation, columns):
        seen.append(relation)
        return fingerprints(con, relation, columns)

    monkeypatch.setattr(publish_rows, "group_fingerprints", spy)
    return seen


def test_a_group_local_view_is_hashed_only_for_the_models_whose_input_rows_changed(
    warehouse, tmp_path, hashed_queries
):
    """A view the build declared local (its rows of a model come from that model's rows of its
    inputs) is hashed for the models whose rows changed in its inputs, and not at all when none
    did; a changed input without model_id, or a definition other than the one recorded (by the
    build, or by the copy), has it hashed whole. The copy holds the view's rows every time."""
    _add_model_rows(warehouse)
    _edit(
        warehouse,
        # as dbt writes a view: every relation it reads named with its schema
        "create or replace view scored_view as "
        "select model_id, k, count(*) as n from main.scored group by all",
        "create table labels as select 0 as k, 'zero' as label",
        "create view labelled as select scored.*, labels.label from main.scored "
        "left join main.labels using (k)",
    )
    for view in ("main.scored_view", "main.labelled"):
        _declare_group_local(warehouse, view)
    out = tmp_path / "published"
    publish(warehouse, out)
    # hashed whole: the copy holds no definition yet
    assert any(q.endswith('"labelled"') for q in hashed_queries)
    publish(warehouse, out)  # the standby the next publish starts from records them too

    def of_views() -> list[str]:
        return [q for q in hashed_queries if '"scored_view"' in q or '"labelled"' in q]

    def check(copy: Path) -> None:
        for view in ("scored_view", "labelled"):
            _same_rows(warehouse, copy, view)
            assert _recorded(copy, f"main.{view}") == _held(warehouse, view)

    _edit(warehouse, "update scored set v = 'changed' where model_id = 'm2'")
    hashed_queries.clear()
    copy = publish(warehouse, out)
    assert len(of_views()) == 2 and all(q.endswith("= 'm2')") for q in of_views()), of_views()
    assert _manifest_changes(copy)["main.labelled"] == "updated"
    check(copy)

    _edit(warehouse, "insert into scored values ('m9', 0, 'a new model')")
    hashed_queries.clear()
    copy = publish(warehouse, out)
    # from the standby, the copy before the last one: both models changed since
    assert len(of_views()) == 2, of_views()
    # one branch a model, each with an equality, which DuckDB pushes into a view's scans
    for q in of_views():
        assert q.count(" union all ") == 1 and " in (" not in q, q
        assert "\"model_id\" = 'm2'" in q and "\"model_id\" = 'm9'" in q, q
    check(copy)

    _drop_standby(out)  # from a copy of the last copy: nothing changed since
    hashed_queries.clear()
    copy = publish(warehouse, out)
    assert of_views() == []
    assert _manifest_changes(copy)["main.scored_view"] == "unchanged"
    check(copy)

    # an input without model_id changed: every model of the view that reads it
    _edit(warehouse, "update labels set label = 'nil'")
    hashed_queries.clear()
    copy = publish(warehouse, out)
    assert {q.rsplit(".", 1)[1] for q in of_views()} == {'"labelled"'}
    check(copy)

    # a definition other than the one the build recorded: hashed whole
    _edit(
        warehouse,
        "create or replace view scored_view as "
        "select model_id, k, count(*) + 1 as n from main.scored group by all",
        "update scored set v = 'again' where model_id = 'm1'",
    )
    hashed_queries.clear()
    copy = publish(warehouse, out)
    assert any(q.endswith('"scored_view"') for q in of_views())
    check(copy)

    # defined anew and recorded by the build, but not the definition the copy's fingerprints
    # were taken with: hashed whole once more; then, from that copy, by model again
    _edit(
        warehouse,
        "create or replace view scored_view as "
        "select model_id, k, count(*) + 2 as n from main.scored group by all",
        "update scored set v = 'once more' where model_id = 'm0'",
    )
    _declare_group_local(warehouse, "main.scored_view")
    _drop_standby(out)
    hashed_queries.clear()
    copy = publish(warehouse, out)
    assert any(q.endswith('"scored_view"') for q in of_views())
    check(copy)
    _edit(warehouse, "update scored set v = 'last' where model_id = 'm3'")
    _drop_standby(out)
    hashed_queries.clear()
    copy = publish(warehouse, out)
    assert len(of_views()) == 2 and all(q.endswith("= 'm3')") for q in of_views()), of_views()
    check(copy)


@pytest.mark.parametrize(
    "query, inputs",
    [
        (
            "with a as (select * from main.t) select * from a join raw.u using (k)",
            {("main", "t"), ("raw", "u")},
        ),
        ("select * from wh.main.t", {("main", "t")}),
        ("select * from t", None),  # no schema, and no CTE of that name
        ("select * from other.main.t", None),
        ("select * from read_parquet('answers.parquet')", None),
        ("select random() as r from main.t", None),
        ("select now() as at, * from main.t", None),
        ("select twice(k) from main.t", None),  # a macro of the warehouse
        ("selec nothing", None),
    ],
)
def test_the_inputs_of_a_view_come_from_duckdbs_own_parse_of_it(query, inputs):
    con = duckdb.connect()
    con.execute("attach ':memory:' as wh")
    con.execute("create macro wh.main.twice(x) as x * 2")
    got = publish_views.query_inputs(con, "wh", f"CREATE VIEW main.v AS {query};")
    assert got == (None if inputs is None else frozenset(inputs))
