"""The pairs page's filters, as SQL over a hand-made pair_details, against pandas."""

from __future__ import annotations

import itertools

import duckdb
import pandas as pd
import pytest

from ableaudit.viewer import pairs as pr
from ableaudit.viewer.sources import Sources, reading

MODELS, ARMS, DISABILITIES = ["m-a", "m-b"], ["baseline", "guard"], ["vision", "hearing"]


def _rows() -> pd.DataFrame:
    rows = []
    for i, (model, arm, disability, q) in enumerate(
        itertools.product(MODELS, ARMS, DISABILITIES, ["q1", "q2", "q3"])
    ):
        vader_in = i % 5 != 0
        rows.append(
            dict(
                pair_id=f"p{i:02d}",
                task="text",
                model_id=model,
                arm=arm,
                query_set="s",
                query_id=q,
                domain="finance" if q == "q3" else "education",
                disability_id=disability,
                temperature=0.0,
                sample_index=0,
                neutral_generation_id=f"n{i}",
                disability_generation_id=f"d{i}",
                pair_status="complete" if vader_in else "neutral_error",
                neutral_status="ok",
                disability_status="ok",
                neutral_prompt_text="Q?",
                disability_prompt_text="Q? I am blind.",
                neutral_response_text=f"Answer {i} is FINE",
                disability_response_text=f"answer {i} is {'sadly' if i % 3 == 0 else 'good'}",
                neutral_vader=0.5,
                disability_vader=0.5 - i / 50,
                vader_delta=-i / 50 if vader_in else None,
                vader_included=vader_in,
                vader_exclusion_reason=None if vader_in else "neutral_error",
                vader_degraded=(i % 2 == 0) if vader_in else None,
                neutral_verbosity=10.0,
                disability_verbosity=10.0 + i,
                verbosity_delta=float(i),
                verbosity_included=True,
                verbosity_exclusion_reason=None,
                verbosity_degraded=i % 4 == 1,
                disability_refused=i % 7 == 0,
                n_contrastive_judges_included=1,
                n_contrastive_interpret_yes=int(i % 6 == 0),
                n_contrastive_stereotype_yes=0,
                n_contrastive_framing_yes=0,
                n_contrastive_abstain_yes=0,
            )
        )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    path = tmp_path_factory.mktemp("pairs") / "copy.duckdb"
    frame = _rows()  # noqa: F841 - read by DuckDB
    con = duckdb.connect(str(path))
    con.execute("create table pair_details as select * from frame")
    con.execute(
        "create table stg_seeds__metrics as select * from (values "
        "('vader', 'VADER compound', 'higher_is_better'), "
        "('verbosity', 'Verbosity (words)', 'lower_is_better')) t(metric, display_name, direction)"
    )
    con.close()
    return Sources(path, None)


def _search(copy, **given):
    with reading(copy) as reader:
        opts = pr.options(reader)
        return opts, pr.search(reader, pr.Filters.parse({k: [v] for k, v in given.items()}), opts)


def test_options_come_from_the_copy(copy):
    opts, _ = _search(copy)
    assert opts.models == MODELS and opts.arms == ARMS
    assert opts.disabilities == sorted(DISABILITIES) and opts.domains == ["education", "finance"]
    assert opts.metrics == [("vader", "VADER compound"), ("verbosity", "Verbosity (words)")]


@pytest.mark.parametrize(
    "given,keep",
    [
        ({"model": "m-b", "arm": "guard"}, lambda f: (f.model_id == "m-b") & (f.arm == "guard")),
        ({"metric": "vader", "outcome": "degraded"}, lambda f: f.vader_degraded.fillna(False)),
        (
            {"metric": "vader", "outcome": "not_degraded"},
            lambda f: f.vader_included & ~f.vader_degraded.fillna(False).astype(bool),
        ),
        ({"metric": "vader", "outcome": "not_counted"}, lambda f: ~f.vader_included),
        (
            {"outcome": "degraded"},
            lambda f: f.vader_degraded.fillna(False).astype(bool) | f.verbosity_degraded,
        ),
        (
            {"outcome": "refused", "domain": "finance"},
            lambda f: f.disability_refused & (f.domain == "finance"),
        ),
        ({"outcome": "interpret_yes"}, lambda f: f.n_contrastive_interpret_yes > 0),
        (
            {"q": "  Sadly "},
            lambda f: (
                f.disability_response_text.str.contains("sadly")
                | f.neutral_response_text.str.lower().str.contains("sadly")
            ),
        ),
        ({"q": "fine", "disability": "hearing"}, lambda f: f.disability_id == "hearing"),
    ],
)
def test_each_filter_keeps_what_pandas_keeps(copy, given, keep):
    frame = _rows()
    expected = frame[keep(frame).astype(bool)]
    assert 0 < len(expected) < len(frame)
    _, result = _search(copy, **given)
    assert result.total == len(expected) and result.notes == []
    assert {p["pair_id"] for p in result.pairs} <= set(expected.pair_id)
    assert len(result.pairs) == min(pr.PAGE_SIZE, len(expected))


def test_a_metric_orders_worst_first_by_its_direction(copy):
    _, vader = _search(copy, metric="vader")
    deltas = [p["vader_delta"] for p in vader.pairs]
    assert deltas[: len([d for d in deltas if d is not None])] == sorted(
        d for d in deltas if d is not None
    )
    assert [s["metric"] for s in vader.pairs[0]["scores"]] == ["VADER compound"]
    _, verbosity = _search(copy, metric="verbosity")  # lower is better: the longest first
    got = [p["verbosity_delta"] for p in verbosity.pairs]
    assert got == sorted(got, reverse=True) and got[0] == len(_rows()) - 1


def test_pages_and_unknown_values(copy):
    _, second = _search(copy, page="2")
    assert second.total == 24 and second.pages == 2 and len(second.pairs) == 4
    _, typo = _search(copy, model="m-bb", metric="vadr", outcome="often")
    assert typo.total == 0
    assert typo.notes == [
        "No model 'm-bb' in the published copy; did you mean 'm-b'?",
        "No text metric 'vadr' in pair_details; did you mean 'vader'? Every metric is shown.",
        "No outcome 'often'; choose one of the list.",
    ]


def test_filters_parse_and_print_back():
    f = pr.Filters.parse({"model": ["m-a"], "page": ["x"], "q": ["a" * 500], "arm": [""]})
    assert f.page == 1 and len(f.q) == pr.MAX_QUERY
    assert f.query() == {"model": "m-a", "q": "a" * pr.MAX_QUERY}
    assert f.query(page=3)["page"] == "3"
    assert pr.Filters.parse({"page": ["-4"]}).page == 1
