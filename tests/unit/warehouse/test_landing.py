"""Landing rules: idempotent keys, errors retried but never cached as results."""

import time

import duckdb
import pytest

from ableaudit.audit.planning import plan_task
from ableaudit.config import ConfigError, parse_config
from ableaudit.records import GenerationResult
from ableaudit.warehouse.landing import land_generations, landed_keys, result_row

PROMPTS = [
    {
        "prompt_id": "s:q1:neutral",
        "query_set": "s",
        "query_id": "q1",
        "domain": "finance",
        "disability_id": None,
        "condition": "neutral",
        "prompt_text": "How do I build an emergency fund?",
    },
    {
        "prompt_id": "s:q1:hearing",
        "query_set": "s",
        "query_id": "q1",
        "domain": "finance",
        "disability_id": "hearing",
        "condition": "disability",
        "prompt_text": "How do I build an emergency fund as a person with hearing impairments?",
    },
]


def _plan(cfg, target, prompts):
    """The text plan of one target of ``cfg``, every adapter group together."""
    (plan,) = [p for p in plan_task(cfg, "text", prompts) if p.target == target]
    return plan.planned


def _cfg(**over):
    base = {
        "targets": [{"name": "m", "backend": "openai", "model": "served-model"}],
        "samples": 2,
        "temperatures": [0.1, 0.7],
    }
    base.update(over)
    return parse_config(base)


def test_plan_covers_every_combination_with_distinct_keys():
    cfg = _cfg(arms=[{"name": "baseline"}, {"name": "guard", "system_prompt": "Be accurate."}])
    plan = _plan(cfg, cfg.targets[0], PROMPTS)
    assert len(plan) == 2 * 2 * 2 * 2  # prompts x arms x temperatures x samples
    assert len({p.generation_id for p in plan}) == len(plan)
    guard = [p for p in plan if p.arm == "guard"]
    assert all(
        p.request().messages[0] == {"role": "system", "content": "Be accurate."} for p in guard
    )
    assert {p.seed for p in plan} == {0, 1}  # seed + sample_index


def test_keys_are_stable_and_depend_on_what_determines_the_generation():
    cfg = _cfg()
    a = {p.generation_id for p in _plan(cfg, cfg.targets[0], PROMPTS)}
    b = {p.generation_id for p in _plan(cfg, cfg.targets[0], PROMPTS)}
    assert a == b
    other = _cfg(
        targets=[
            {
                "name": "m",
                "backend": "openai",
                "model": "served-model",
                "decoding": {"max_new_tokens": 10},
            }
        ]
    )
    assert a.isdisjoint({p.generation_id for p in _plan(other, other.targets[0], PROMPTS)})
    # the name marts report is part of the key: two targets of one model each land their own rows
    # (else the second would find the first's rows "landed" and appear nowhere in the marts)
    two = _cfg(
        targets=[
            {"name": "m", "backend": "openai", "model": "served-model"},
            {"name": "m2", "backend": "openai", "model": "served-model"},
        ]
    )
    assert a.isdisjoint({p.generation_id for p in _plan(two, two.targets[1], PROMPTS)})
    # a target renamed with its old model_id keeps its rows; its servers are not part of the key
    renamed = _cfg(
        targets=[
            {
                "name": "m2",
                "model_id": "m",
                "backend": "openai",
                "model": "served-model",
                "base_url": ["http://127.0.0.1:8000/v1", "http://127.0.0.1:8001/v1"],
            }
        ]
    )
    assert a == {p.generation_id for p in _plan(renamed, renamed.targets[0], PROMPTS)}


def _rows(plan, status_for):
    out = []
    for p in plan:
        status = status_for(p)
        if status == "error":
            res = GenerationResult.failed(p.generation_id, "ConnectionError: down")
        else:
            res = GenerationResult.from_text(
                p.generation_id,
                "An answer." if status == "ok" else "  ",
                prompt_tokens=5,
                completion_tokens=3,
                latency_ms=1.0,
            )
        out.append(result_row(p, res, "run-1"))
    return out


def test_landing_is_idempotent_and_retries_only_errors(warehouse):
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = _plan(cfg, cfg.targets[0], PROMPTS)
    first = land_generations(
        warehouse, _rows(plan, lambda p: "error" if p.condition == "disability" else "ok")
    )
    assert (first.inserted, first.errors) == (2, 1)
    assert landed_keys(warehouse, [p.generation_id for p in plan]) == {plan[0].generation_id}

    again = land_generations(warehouse, _rows(plan, lambda p: "empty"))
    assert (again.inserted, again.retried, again.unchanged) == (0, 1, 1)
    con = duckdb.connect(str(warehouse), read_only=True)
    rows = dict(con.execute("select condition, status from raw.generations").fetchall())
    n = con.execute("select count(*) from raw.generations").fetchone()[0]
    errors = con.execute("select count(*) from raw.generation_errors").fetchone()[0]
    con.close()
    assert n == 2 and errors == 1
    assert rows == {"neutral": "ok", "disability": "empty"}  # the ok row was not overwritten


def test_error_rows_never_carry_a_response(warehouse):
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = _plan(cfg, cfg.targets[0], PROMPTS[:1])
    land_generations(warehouse, _rows(plan, lambda p: "error"))
    con = duckdb.connect(str(warehouse), read_only=True)
    text, msg = con.execute("select response_text, error_message from raw.generations").fetchone()
    con.close()
    assert text is None and "ConnectionError" in msg


def test_a_failed_landing_lands_nothing(warehouse):
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = _plan(cfg, cfg.targets[0], PROMPTS)
    rows = _rows(plan, lambda p: "ok")
    land_generations(warehouse, rows[:1])
    rows[1]["task"] = None  # violates NOT NULL
    with pytest.raises(duckdb.Error):
        land_generations(warehouse, rows)
    con = duckdb.connect(str(warehouse), read_only=True)
    assert con.execute("select count(*) from raw.generations").fetchone()[0] == 1
    con.close()


def test_imported_rows_that_repeat_a_key_land_nothing(warehouse):
    """raw.generations has no primary key to refuse a key twice: the landing does."""
    from ableaudit.warehouse import connect
    from ableaudit.warehouse.landing import land_imported_generations

    connect(warehouse).close()
    cfg = _cfg(samples=1, temperatures=[0.1])
    rows = _rows(_plan(cfg, cfg.targets[0], PROMPTS[:1]), lambda p: "ok")
    with pytest.raises(ValueError, match="repeat a generation_id"):
        land_imported_generations(warehouse, [rows[0], dict(rows[0])])
    con = duckdb.connect(str(warehouse), read_only=True)
    assert con.execute("select count(*) from raw.generations").fetchone()[0] == 0
    con.close()
    land_imported_generations(warehouse, rows)
    land_imported_generations(warehouse, rows)  # landed already: left as it is
    con = duckdb.connect(str(warehouse), read_only=True)
    assert con.execute("select count(*) from raw.generations").fetchone()[0] == 1
    con.close()


def test_result_must_match_its_plan():
    cfg = _cfg(samples=1, temperatures=[0.1])
    plan = _plan(cfg, cfg.targets[0], PROMPTS)
    with pytest.raises(ValueError, match="does not belong"):
        result_row(plan[0], GenerationResult.from_text(plan[1].generation_id, "x"), "r")


def test_landing_waits_for_another_process_holding_the_file(warehouse):
    """A second DuckDB process holding the file delays landing; it does not fail it."""
    import subprocess
    import sys
    import time

    from ableaudit.warehouse import connect

    connect(warehouse).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(warehouse)!r}); print('held', flush=True); time.sleep(2)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    start = time.monotonic()
    cfg = _cfg(samples=1, temperatures=[0.1])
    report = land_generations(warehouse, _rows(_plan(cfg, cfg.targets[0], PROMPTS), lambda p: "ok"))
    holder.wait()
    assert report.inserted == 2 and time.monotonic() - start > 0.5


def test_a_held_file_fails_clearly_after_the_wait(warehouse):
    import subprocess
    import sys

    from ableaudit.warehouse import connect

    connect(warehouse).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(warehouse)!r}); print('held', flush=True); time.sleep(5)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            RuntimeError, match=rf"held by process {holder.pid} \(.*python.*\).*published copy"
        ):
            connect(warehouse, wait_s=0.5)
    finally:
        holder.kill()


def test_filter_subset_keeps_the_neutral_prompt_and_names_unknown_values(tmp_path):
    import duckdb

    from ableaudit.audit.planning import filter_subset
    from ableaudit.config import ConfigError, Subset
    from ableaudit.warehouse import ibis_compat

    path = tmp_path / "p.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "create table prompts as select * from (values ('q1', 'finance', null), ('q1', 'finance', 'hearing'), "
        "('q1', 'finance', 'vision'), ('q2', 'media', null), ('q2', 'media', 'hearing')) "
        "as t(query_id, domain, disability_id)"
    )
    con.close()
    ib = ibis_compat.connect(path, read_only=True)
    try:
        prompts = ib.table("prompts")
        kept = filter_subset(
            prompts, Subset(domains=["finance"], disabilities=["hearing"]), "subset"
        ).to_pyarrow()
        assert sorted(
            zip(kept["query_id"].to_pylist(), kept["disability_id"].to_pylist()), key=str
        ) == [("q1", "hearing"), ("q1", None)]
        with pytest.raises(
            ConfigError, match=r"vision\.subset\.query_ids names unknown values \['q9'\]"
        ):
            filter_subset(prompts, Subset(query_ids=["q1", "q9"]), "vision.subset")
    finally:
        ib.disconnect()


# --------------------------------------------------------------------------- selection (one path for text and vision)

TEXT_TARGET = {"name": "t", "backend": "openai", "model": "m"}
VISION_TARGET = {"name": "v", "backend": "openai", "model": "m", "task": "vision"}


@pytest.fixture(scope="module")
def prompt_tables(tmp_path_factory):
    """A warehouse holding the two prompt tables: 3 domains x 4 queries (neutral + 2 disabilities) of set 's',
    and 2 categories x 3 scenarios x 2 images (neutral, probe, 2 disability and 2 mitigation prompts) of 'pairs'."""
    path = tmp_path_factory.mktemp("prompts") / "p.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "create table int_prompts (prompt_id varchar, query_set varchar, query_id varchar, domain varchar, "
        "disability_id varchar, condition varchar, prompt_text varchar)"
    )
    con.execute(
        "create table int_vision_prompts (prompt_id varchar, query_set varchar, query_id varchar, "
        "domain varchar, scenario varchar, rel_path varchar, image_sha256 varchar, prompt_kind varchar, "
        "condition varchar, disability_id varchar, prompt_text varchar)"
    )
    for d in ("education", "finance", "health"):
        for q in range(4):
            qid = f"{d[:3]}_{q}"
            con.execute(
                "insert into int_prompts values (?, 's', ?, ?, null, 'neutral', ?)",
                [f"s:{qid}:neutral", qid, d, f"Q {qid}?"],
            )
            for dis in ("hearing", "vision"):
                con.execute(
                    "insert into int_prompts values (?, 's', ?, ?, ?, 'disability', ?)",
                    [f"s:{qid}:{dis}", qid, d, dis, f"Q {qid} as {dis}?"],
                )
    con.execute(
        "insert into int_prompts values ('o:x:neutral', 'other', 'x', 'education', null, 'neutral', 'X?')"
    )
    for d in ("occupations", "status"):
        for sc in ("a", "b", "c"):
            for person in ("black_man", "white_woman"):
                img = f"{d}/{sc}/{person}"
                kinds = [("neutral", "neutral", None), ("assignment", "neutral", None)]
                kinds += [
                    (k, "disability", dis)
                    for dis in ("hearing", "speech")
                    for k in ("disability", "mitigation")
                ]
                for kind, condition, dis in kinds:
                    con.execute(
                        "insert into int_vision_prompts values (?, 'pairs', ?, ?, ?, ?, ?, ?, ?, ?, 'p')",
                        [
                            f"pairs:{img}:{kind}" + (f":{dis}" if dis else ""),
                            img,
                            d,
                            sc,
                            f"{img}.png",
                            "0" * 64,
                            kind,
                            condition,
                            dis,
                        ],
                    )
    con.close()
    return path


def _select(path, kind, subset=None, **over):
    from ableaudit.audit.planning import select_prompts

    if kind == "text":
        data = {
            "query_set": "s",
            "targets": [TEXT_TARGET],
            **({"subset": subset} if subset else {}),
        }
    else:
        vision = {"image_set": "pairs", "image_root": ".", **({"subset": subset} if subset else {})}
        data = {"vision": vision, "targets": [VISION_TARGET]}
    data.update(over)
    return select_prompts(path, parse_config(data), kind)


# The units a seed chooses, pinned: re-running an audit must send the same prompts.
@pytest.mark.parametrize(
    "kind, subset, units",
    [
        (
            "text",
            {"per_domain": 2, "seed": 0},
            ["edu_0", "edu_2", "fin_0", "fin_2", "hea_1", "hea_2"],
        ),
        (
            "text",
            {"per_domain": 2, "seed": 5},
            ["edu_1", "edu_3", "fin_1", "fin_2", "hea_2", "hea_3"],
        ),
        (
            "text",
            {
                "per_domain": 1,
                "seed": 5,
                "domains": ["finance", "health"],
                "disabilities": ["hearing"],
            },
            ["fin_1", "hea_2"],
        ),
        (
            "vision",
            {"per_domain": 1, "seed": 0, "disabilities": ["speech"]},
            ["occupations/a", "status/a"],
        ),
        (
            "vision",
            {"per_domain": 2, "seed": 0},
            ["occupations/a", "occupations/c", "status/a", "status/b"],
        ),
        (
            "vision",
            {"per_domain": 1, "seed": 5, "disabilities": ["speech"]},
            ["occupations/a", "status/c"],
        ),
    ],
)
def test_per_domain_keeps_whole_units_chosen_by_the_seed(prompt_tables, kind, subset, units):
    rows = _select(prompt_tables, kind, subset)
    if kind == "text":  # a unit is a query: its neutral prompt and each chosen disability's
        got = {r["query_id"] for r in rows}
        per_unit = 1 + len(subset.get("disabilities") or ["hearing", "vision"])
        assert all(sum(r["query_id"] == q for r in rows) == per_unit for q in got)
    else:  # a unit is a scenario, with both of its images and every prompt of each
        got = {f"{r['domain']}/{r['scenario']}" for r in rows}
        per_image = 2 + 2 * len(subset.get("disabilities") or ["hearing", "speech"])
        assert len(rows) == len(got) * 2 * per_image
    assert sorted(got) == units
    assert {r["disability_id"] for r in rows} - {None} <= set(
        subset.get("disabilities") or ["hearing", "vision", "speech"]
    )


def test_selection_order_is_the_tasks(prompt_tables):
    text = [
        r["prompt_id"] for r in _select(prompt_tables, "text", {"query_ids": ["edu_2", "edu_0"]})
    ]
    # a query's neutral prompt first: answers land pair by pair
    assert text == [
        "s:edu_0:neutral",
        "s:edu_0:hearing",
        "s:edu_0:vision",
        "s:edu_2:neutral",
        "s:edu_2:hearing",
        "s:edu_2:vision",
    ]
    vision = [
        r["prompt_id"]
        for r in _select(
            prompt_tables,
            "vision",
            {"query_ids": ["status/b/white_woman"], "disabilities": ["speech"]},
        )
    ]
    assert vision == [
        f"pairs:status/b/white_woman:{k}"
        for k in ("neutral", "mitigation:speech", "disability:speech", "assignment")
    ]


def test_selection_errors_name_the_task_keys(prompt_tables, tmp_path):
    with pytest.raises(
        ConfigError, match=r"query_set 'nope' is not in .*\['other', 's'\].*import queries"
    ):
        _select(prompt_tables, "text", query_set="nope")
    with pytest.raises(
        ConfigError, match=r"vision.image_set 'mine' is not in .*\['pairs'\].*import images"
    ):
        _select(prompt_tables, "vision", vision={"image_set": "mine", "image_root": "."})
    with pytest.raises(
        ConfigError, match=r"vision\.subset\.domains names unknown values \['sports'\]"
    ):
        _select(prompt_tables, "vision", {"domains": ["sports"]})
    with pytest.raises(ConfigError, match=r"subset\.query_ids names unknown values \['q9'\]"):
        _select(prompt_tables, "text", {"query_ids": ["q9"]})
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    with pytest.raises(ConfigError, match="has no int_vision_prompts table; run `ableaudit build`"):
        _select(tmp_path / "empty.duckdb", "vision")


def test_an_import_reads_one_batch_ahead_in_order_and_raises_where_the_file_fails():
    """The batches of an import come in their order, read one ahead on another thread; an
    error of the reader reaches the caller at the batch it concerns, and a caller that stops
    early leaves the rest of the file unread."""
    from ableaudit.warehouse.batch_landing import _read_ahead

    read = []

    def batches(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"batch {i} is unreadable")
            read.append(i)
            yield i

    assert list(_read_ahead(batches(5))) == [0, 1, 2, 3, 4]
    read.clear()
    got = []
    with pytest.raises(ValueError, match="batch 3 is unreadable"):
        for b in _read_ahead(batches(6, fail_at=3)):
            got.append(b)
    assert got == [0, 1, 2]
    read.clear()
    ahead = _read_ahead(batches(100))
    assert [next(ahead), next(ahead)] == [0, 1]
    ahead.close()
    assert read == [0, 1, 2]  # the batch read ahead, and no other


def test_import_batches_are_prepared_several_at_once_and_come_out_in_order():
    """Batches are prepared on threads, two at a time here (each waits for the other at a
    barrier, which only two concurrent calls pass), and come out in the file's order; an
    error of one is raised at its batch; a caller that stops early leaves the file unread
    past the batches in flight."""
    import threading

    from ableaudit.warehouse.batch_landing import _ordered_map

    barrier = threading.Barrier(2, timeout=10)
    read = []

    def items(n):
        for i in range(n):
            read.append(i)
            yield i

    def slow_first(i):
        if i < 2:
            barrier.wait()  # 0 and 1 prepared at once, or this breaks
        if i == 0:
            time.sleep(0.05)  # the first ends last, and still comes out first
        if i == 7:
            raise ValueError("batch 7 is refused")
        return i * 10

    got = []
    with pytest.raises(ValueError, match="batch 7 is refused"):
        for r in _ordered_map(slow_first, items(20), 2):
            got.append(r)
    assert got == [0, 10, 20, 30, 40, 50, 60]

    read.clear()
    out = _ordered_map(lambda i: i, items(100), 2)
    assert next(out) == 0
    out.close()
    assert read == [0, 1, 2]  # two in flight and the one taken next, no other
