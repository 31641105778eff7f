"""Which file the viewer reads: the published copy, never the live file."""

from __future__ import annotations

import duckdb
import pytest

from ableaudit.viewer.sources import ViewerError, reading, resolve


def _duckdb(path, published: bool = False):
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(str(path))
    con.execute("create table t as select 1 as x")
    if published:
        con.execute("create schema publish")
        con.execute("create table publish.relations as select 'main' as schema_name")
    con.close()
    return path


def test_the_copy_beside_the_live_file_is_read(tmp_path):
    live = _duckdb(tmp_path / "wh" / "a.duckdb")
    copy = _duckdb(tmp_path / "wh" / "published" / "a.duckdb", published=True)
    sources = resolve(live)
    assert (sources.published, sources.live) == (copy, live)
    assert resolve(copy) == sources  # the copy named directly finds its live file


def test_a_copy_alone_is_read_without_rating(tmp_path):
    lone = _duckdb(tmp_path / "sent" / "audit.duckdb", published=True)
    assert (resolve(lone).published, resolve(lone).live) == (lone, None)
    in_published = _duckdb(tmp_path / "x" / "published" / "b.duckdb", published=True)
    assert resolve(in_published).live is None


def test_a_live_file_without_a_copy_or_no_file_is_one_clear_error(tmp_path):
    live = _duckdb(tmp_path / "wh" / "a.duckdb")
    with pytest.raises(
        ViewerError, match=r"has no published copy .* `ableaudit publish --warehouse"
    ):
        resolve(live)
    with pytest.raises(ViewerError, match="no warehouse at .* and no published copy at"):
        resolve(tmp_path / "none.duckdb")


def test_a_reader_lists_relations_and_closes(tmp_path):
    copy = _duckdb(tmp_path / "published" / "a.duckdb", published=True)
    with reading(resolve(copy)) as reader:
        assert reader.has("main.t") and reader.has("publish.relations") and not reader.has("main.u")
        assert reader.columns("main.t") == ["x"] and reader.values("select x from t") == [1]
        with pytest.raises(ViewerError, match="build and publish it again"):
            reader.rows("select * from no_such_table")
    duckdb.connect(str(copy)).close()  # closed: it opens for writing again
