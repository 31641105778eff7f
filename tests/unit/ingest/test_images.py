"""Image sets: the PAIRS loader, manifests, path escapes, landing in raw.images, the PNG decoder, the CLI."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest

from ableaudit.ingest.images import (
    land_images,
    load_manifest_csv,
    load_pairs_tree,
    parse_pairs_name,
)
from ableaudit.media import (
    MAX_IMAGE_BYTES,
    MAX_IMAGE_BYTES_ENV,
    ImageSetError,
    ImageTooLarge,
    decode_png,
    image_bytes,
    image_dimensions,
    read_image_bytes,
    read_image_file,
    resolve_under,
)
from ableaudit.records import ImageRef
from tests.fixtures.tiny_vlm import (
    FAKE_PAIRS,
    make_pairs_tree,
    png_bytes,
    synthetic_pixels,
    write_png,
)


def _rows(wh: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


# --------------------------------------------------------------------------- PAIRS tree


def test_pairs_identity_comes_from_the_file_name_never_the_scenario_folder(tmp_path):
    loaded = load_pairs_tree(make_pairs_tree(tmp_path / "data"))
    by_id = {r.image_id: r for r in loaded.records}
    assert len(by_id) == sum(len(v) for s in FAKE_PAIRS.values() for v in s.values()) == 16
    r = by_id["occupations/black_apron/white_woman1"]
    assert (r.race, r.gender, r.scenario, r.category) == (
        "white",
        "woman",
        "black_apron",
        "occupations",
    )
    r = by_id["status/white_shirt/black_man"]
    assert (r.race, r.gender, r.scenario) == ("black", "man", "white_shirt")
    assert by_id["status/phone/white_man1"].rel_path == "status/phone/white_man1.png"
    assert all(r.width == 32 and r.height == 32 for r in loaded.records)
    data = (tmp_path / "data" / "status/phone/white_man1.png").read_bytes()
    assert by_id["status/phone/white_man1"].sha256 == hashlib.sha256(data).hexdigest()
    # the repository layout: the folder above data/ works too
    assert {r.image_id for r in load_pairs_tree(tmp_path).records} == set(by_id)


def test_bad_pairs_names_are_reported_all_together_not_guessed(tmp_path):
    root = make_pairs_tree(tmp_path / "data")
    write_png(root / "occupations" / "black_apron" / "woman_white.png", "x")  # swapped
    write_png(root / "status" / "phone" / "asian_woman.png", "y")  # unknown race
    write_png(root / "status" / "phone" / "person.png", "z")  # no pattern
    (root / "status" / "phone" / "notes.txt").write_text("hi")
    write_png(root / "hobbies" / "chess" / "white_man.png", "w")  # unknown category
    (root / "status" / "phone" / ".DS_Store").write_bytes(b"\0")  # hidden: skipped
    with pytest.raises(ImageSetError) as err:
        load_pairs_tree(root)
    msg = str(err.value)
    for fragment in (
        "occupations/black_apron/woman_white.png",
        "race 'woman'",
        "status/phone/asian_woman.png",
        "race 'asian'",
        "status/phone/person.png",
        "status/phone/notes.txt",
        "hobbies/",
        "nothing loaded",
    ):
        assert fragment in msg, fragment
    assert ".DS_Store" not in msg


def test_parse_pairs_name_rules():
    assert parse_pairs_name("white_woman1.png") == ("white", "woman")
    assert parse_pairs_name("Black_Man.png") == ("black", "man")
    assert "gender 'men'" in parse_pairs_name("black_men.png")
    assert "not <race>_<gender>" in parse_pairs_name("black_man.jpg")


def test_a_file_that_is_not_an_image_is_refused(tmp_path):
    root = make_pairs_tree(tmp_path / "data")
    (root / "status" / "phone" / "black_man.png").write_bytes(b"not a png at all")
    with pytest.raises(ImageSetError, match="status/phone/black_man.png: not a PNG"):
        load_pairs_tree(root)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_link_out_of_the_tree_is_refused(tmp_path):
    root = make_pairs_tree(tmp_path / "data")
    outside = write_png(tmp_path / "elsewhere" / "secret.png", "s")
    link = root / "status" / "phone" / "black_woman.png"
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(ImageSetError, match="escapes the image root"):
        load_pairs_tree(root)


# --------------------------------------------------------------------------- manifest


def _manifest(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "manifest.csv"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_manifest_loads_identity_and_extra_columns(tmp_path):
    root = tmp_path / "imgs"
    write_png(root / "a.png", "a")
    write_png(root / "sub" / "b.png", "b")
    m = _manifest(
        tmp_path,
        [
            "Image ID,File Path,Scenario,Gender,Race,Age Group,Category",
            "img-a,a.png,kitchen,woman,asian,30-40,home",
            f"img-b,{root / 'sub' / 'b.png'},office,man,latino,,",
        ],
    )
    loaded = load_manifest_csv(m, root, "mine")
    a, b = sorted(loaded.records, key=lambda r: r.image_id)
    assert (a.gender, a.race, a.category, a.extra_json) == (
        "woman",
        "asian",
        "home",
        '{"age_group": "30-40"}',
    )
    assert (b.rel_path, b.category, b.extra_json) == (
        "sub/b.png",
        "office",
        None,
    )  # absolute inside the root: kept


@pytest.mark.parametrize("path", ["../outside.png", "/etc/passwd", "sub/../../outside.png"])
def test_manifest_path_escaping_the_root_is_refused(tmp_path, path):
    root = tmp_path / "imgs"
    write_png(root / "a.png", "a")
    write_png(tmp_path / "outside.png", "o")
    m = _manifest(
        tmp_path,
        ["image_id,path,scenario,gender,race", "x,a.png,s,man,white", f"y,{path},s,man,white"],
    )
    with pytest.raises(ImageSetError, match="escapes the image root"):
        load_manifest_csv(m, root, "mine")


def test_manifest_problems_are_listed_with_their_lines(tmp_path):
    root = tmp_path / "imgs"
    write_png(root / "a.png", "a")
    m = _manifest(
        tmp_path,
        [
            "image_id,path,scenario,gender,race",
            "x,a.png,s,man,white",
            "x,a.png,s,man,white",  # duplicate id
            "y,missing.png,s,man,white",  # no file
            "z,a.png,s,,white",  # empty gender
        ],
    )
    with pytest.raises(ImageSetError) as err:
        load_manifest_csv(m, root, "mine")
    msg = str(err.value)
    assert "line 3: image_id 'x' repeats line 2" in msg
    assert "line 4: 'missing.png' is not a file" in msg
    assert "line 5: empty ['gender']" in msg
    with pytest.raises(ImageSetError, match=r"lacks column\(s\) \['race'\]"):
        load_manifest_csv(
            _manifest(tmp_path, ["image_id,path,scenario,gender", "x,a.png,s,man"]), root, "mine"
        )


def test_resolve_under_keeps_paths_inside(tmp_path):
    (tmp_path / "r").mkdir()
    full, rel = resolve_under(tmp_path / "r", "x/../y.png")
    assert rel == "y.png" and full == (tmp_path / "r" / "y.png").resolve()
    with pytest.raises(ImageSetError):
        resolve_under(tmp_path / "r", "..")


# --------------------------------------------------------------------------- landing


def test_landing_is_idempotent_and_refuses_new_bytes_under_used_ids(tmp_path, warehouse):
    root = make_pairs_tree(tmp_path / "data")
    first = land_images(warehouse, load_pairs_tree(root))
    assert first.as_dict() == {"inserted": 16, "updated": 0, "unchanged": 0, "removed": 0}
    before = _rows(warehouse, "select image_id, sha256, loaded_at from raw.images order by 1")
    again = land_images(warehouse, load_pairs_tree(root))
    assert again.as_dict() == {"inserted": 0, "updated": 0, "unchanged": 16, "removed": 0}
    assert (
        _rows(warehouse, "select image_id, sha256, loaded_at from raw.images order by 1") == before
    )

    # new bytes under an id no audit used yet: updated in place
    write_png(root / "status" / "phone" / "black_man.png", "changed")
    (root / "status" / "phone" / "black_woman.png").unlink()
    rep = land_images(warehouse, load_pairs_tree(root))
    assert rep.as_dict() == {"inserted": 0, "updated": 1, "unchanged": 14, "removed": 1}
    assert _rows(warehouse, "select count(*) from raw.images")[0][0] == 15

    # an audit used status/phone/white_man1: new bytes there are refused, then accepted with replace
    con = duckdb.connect(str(warehouse))
    con.execute(
        "insert into raw.generations (generation_id, task, target, model_id, backend, arm, query_set, query_id, "
        "condition, prompt_id, prompt_text, sample_index, status, source) values "
        "('g', 'vision', 't', 'm', 'openai', 'baseline', 'pairs', 'status/phone/white_man1', 'neutral', 'p', "
        "'x', 0, 'ok', 'generated')"
    )
    con.close()
    write_png(root / "status" / "phone" / "white_man1.png", "changed too")
    with pytest.raises(ImageSetError, match="already used"):
        land_images(warehouse, load_pairs_tree(root))
    assert land_images(warehouse, load_pairs_tree(root), replace=True).updated == 1


def test_read_image_bytes_checks_the_landed_hash(tmp_path):
    p = write_png(tmp_path / "a.png", "a")
    sha = hashlib.sha256(p.read_bytes()).hexdigest()
    assert read_image_bytes(tmp_path, "a.png", sha) == p.read_bytes()
    write_png(p, "b")
    with pytest.raises(ImageSetError, match="changed since it was loaded"):
        read_image_bytes(tmp_path, "a.png", sha)


def _sparse_png(path: Path, size: int) -> Path:
    """A PNG stretched to ``size`` bytes by truncate (sparse: no disk, and no reader survives
    reading 8 GiB whole on a test machine)."""
    write_png(path, "a")
    os.truncate(path, size)
    return path


def test_an_image_over_the_byte_cap_is_refused_by_its_size_before_it_is_read(tmp_path):
    p = _sparse_png(tmp_path / "a.png", 8 << 30)
    with pytest.raises(ImageTooLarge) as err:
        read_image_file(p)
    assert (err.value.size, err.value.cap) == (8 << 30, MAX_IMAGE_BYTES)
    assert str(err.value) == (
        "the file is 8,589,934,592 bytes (8,192.0 MiB), over the cap of 52,428,800 bytes (50.0 MiB)"
    )
    # the audit reads images by reference when it sends them: the same cap, named with its fix
    with pytest.raises(ImageSetError) as err:
        image_bytes(ImageRef(str(tmp_path), "a.png", "0" * 64))
    message = str(err.value)
    assert "image 'a.png' under" in message and "8,589,934,592 bytes" in message
    assert MAX_IMAGE_BYTES_ENV in message and "changed since" not in message


def test_the_byte_cap_is_exact_and_follows_the_environment(tmp_path, monkeypatch):
    p = _sparse_png(tmp_path / "a.png", MAX_IMAGE_BYTES)
    assert len(read_image_file(p)) == MAX_IMAGE_BYTES
    with pytest.raises(ImageTooLarge):
        read_image_file(p, MAX_IMAGE_BYTES - 1)
    monkeypatch.setenv(MAX_IMAGE_BYTES_ENV, "1_000")
    with pytest.raises(ImageSetError, match="over the cap of 1,000 bytes"):
        read_image_bytes(tmp_path, "a.png")
    with pytest.raises(ImageSetError, match="over the cap of 1,000 bytes"):
        load_pairs_tree(make_pairs_tree(tmp_path / "tree"), "t")
    # an explicit cap (the import's --max-image-bytes) wins over the environment
    assert load_pairs_tree(tmp_path / "tree", "t", max_bytes=MAX_IMAGE_BYTES).records
    monkeypatch.setenv(MAX_IMAGE_BYTES_ENV, "lots")
    with pytest.raises(ImageSetError, match=f"{MAX_IMAGE_BYTES_ENV}='lots' is not a positive"):
        read_image_bytes(tmp_path, "a.png")


# --------------------------------------------------------------------------- decoding


@pytest.mark.parametrize("filters", [(0,), (1,), (2,), (3,), (4,), (0, 1, 2, 3, 4)])
def test_png_decoder_matches_the_test_encoder_for_every_filter(filters):
    pixels = synthetic_pixels("decode", size=13)
    got = decode_png(png_bytes(pixels, filters=filters))
    assert got.shape == (13, 13, 3) and got.dtype == np.uint8
    assert (got == np.array(pixels, dtype=np.uint8)).all()


def test_png_decoder_rgba_and_dimensions():
    pixels = [[(x, y, 7, 200) for x in range(5)] for y in range(3)]
    data = png_bytes(pixels, filters=(4, 3))
    assert (decode_png(data) == np.array(pixels, dtype=np.uint8)).all()
    assert image_dimensions(data) == (5, 3)
    jpeg = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xc0\x00\x11\x08\x00\x20\x00\x30\x03"
    assert image_dimensions(jpeg) == (48, 32)
    with pytest.raises(ValueError, match="not a PNG"):
        decode_png(jpeg)


# --------------------------------------------------------------------------- CLI


def test_cli_import_images(tmp_path):
    root = make_pairs_tree(tmp_path / "data")
    wh = tmp_path / "wh.duckdb"
    cli = str(Path(sys.executable).parent / "ableaudit")
    out = subprocess.run(
        [cli, "import", "images", str(root), "--image-set", "pairs", "--warehouse", str(wh)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "16 images" in out.stdout and "'inserted': 16" in out.stdout
    assert _rows(wh, "select count(*), count(distinct gender || race) from raw.images") == [(16, 4)]
    bad = subprocess.run(
        [cli, "import", "images", str(tmp_path / "nope"), "--warehouse", str(wh)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "neither a PAIRS folder nor a manifest" in bad.stderr
