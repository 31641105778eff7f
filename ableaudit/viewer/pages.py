"""The viewer's pages: what each address answers, read from the published copy per request."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from ableaudit.ingest.annotations import DIMENSIONS, AnnotationError
from ableaudit.viewer import compare as cmp
from ableaudit.viewer import pairs as pr
from ableaudit.viewer import ratings as rt
from ableaudit.viewer.app import (
    REPORT_CSP,
    Response,
    Viewer,
    annotator_cookie,
    set_annotator_cookie,
)
from ableaudit.viewer.sources import ViewerError, reading
from ableaudit.warehouse.connection import WarehouseError

Query = Mapping[str, list[str]]
KINDS = {"rubric": "an answer (rubric score)", "contrastive": "a pair (contrastive labels)"}


def _one(query: Query, name: str) -> str:
    return (query.get(name) or [""])[-1].strip()


def _redirect(location: str, **headers: str) -> Response:
    return Response(303, b"", "text/plain; charset=utf-8", {"Location": location, **headers})


def route(viewer: Viewer, path: str, query: Query, headers: Any) -> Response:
    """The page at ``path``."""
    if path == "/static/viewer.css":
        return Response(body=viewer.css, content_type="text/css; charset=utf-8")
    if path == "/report":
        return _redirect("/report/")
    if path.startswith("/report/"):
        found = viewer.report.page(path[len("/report/") :])
        if found is None:
            return viewer.message(404, "Not found", "The report has no such page.")
        return Response(body=found[0], content_type=found[1], csp=REPORT_CSP)
    pages = {
        "/": lambda: home(viewer),
        "/pairs": lambda: pairs(viewer, query),
        "/compare": lambda: compare(viewer, query),
        "/rate": lambda: rate(viewer, query, headers),
        "/rate/next": lambda: rate_next(viewer, query, headers),
        "/rated": lambda: rated(viewer, query),
    }
    if path not in pages:
        return viewer.message(404, "Not found", "The viewer has no page at this address.")
    try:
        return pages[path]()
    except ViewerError as err:
        return viewer.message(400, "Cannot show this page", str(err))


def home(viewer: Viewer) -> Response:
    with reading(viewer.sources) as reader:
        models = (
            reader.rows(
                "select task, model_id, count(distinct arm) as arms, count(*) as n_pairs, "
                "count(*) filter (where pair_status = 'complete') as n_complete "
                "from pair_details group by task, model_id order by task, model_id"
            )
            if reader.has("main.pair_details")
            else []
        )
        runs = cmp.cohorts(reader, "run")
        ratings = (
            reader.rows(
                "select count(*) as n, count(distinct annotator_id) as annotators "
                "from raw.annotations"
            )[0]
            if reader.has("raw.annotations")
            else {"n": 0, "annotators": 0}
        )
        agreement = (
            reader.rows(
                "select dimension, rater_a, rater_b, n_items, cohen_kappa, spearman_rho, "
                "accuracy, reason from agreement where kind_a = 'human' or kind_b = 'human' "
                "order by dimension, rater_a, rater_b"
            )
            if reader.has("main.agreement")
            else []
        )
    return viewer.page(
        "home.html",
        title="Disability-bias audit viewer",
        current="/",
        models=models,
        runs=runs,
        ratings=ratings,
        agreement=agreement,
        live=viewer.sources.live,
        published=viewer.sources.published,
    )


def pairs(viewer: Viewer, query: Query) -> Response:
    filters = pr.Filters.parse(query)
    with reading(viewer.sources) as reader:
        opts = pr.options(reader)
        result = pr.search(reader, filters, opts)
    return viewer.page(
        "pairs.html",
        title="Pairs: search and filter",
        current="/pairs",
        f=filters,
        opts=opts,
        result=result,
        outcomes=pr.OUTCOMES,
        page_size=pr.PAGE_SIZE,
    )


def compare(viewer: Viewer, query: Query) -> Response:
    choice = cmp.Choice.parse(query)
    with reading(viewer.sources) as reader:
        comparison = cmp.compare(reader, choice)
    return viewer.page(
        "compare.html",
        title=f"Compare {cmp.BY[comparison.choice.by]}",
        current="/compare",
        c=comparison,
        choice=comparison.choice,
        by=cmp.BY,
        page_size=cmp.PAGE_SIZE,
    )


def _kind(query: Query) -> str:
    kind = _one(query, "kind") or "rubric"
    if kind not in KINDS:
        raise ViewerError(
            f"No kind of rating {kind!r}: rate an answer (rubric) or a pair (contrastive)."
        )
    return kind


def _rate_page(
    viewer: Viewer,
    item: rt.Item,
    annotator: str,
    values: Mapping[str, str] | None = None,
    error: str | None = None,
    status: int = 200,
) -> Response:
    return viewer.page(
        "rate.html",
        status,
        title="Rate an answer" if item.kind == "rubric" else "Label a pair of answers",
        current="/rate",
        item=item,
        annotator=annotator,
        values=dict(values or {}),
        error=error,
        dimensions=rt.dimensions(item.kind),
        instructions=rt.instructions(item.kind),
        kinds=KINDS,
    )


def rate(viewer: Viewer, query: Query, headers: Any) -> Response:
    kind = _kind(query)
    item_id = _one(query, "item")
    with reading(viewer.sources) as reader:
        item = rt.item(reader, kind, item_id) if item_id else None
    if item is None:
        return viewer.message(
            404,
            "Nothing to rate here",
            f"The published copy has no {KINDS[kind]} to rate with this id.",
        )
    return _rate_page(viewer, item, annotator_cookie(headers))


def rate_next(viewer: Viewer, query: Query, headers: Any) -> Response:
    kind = _kind(query)
    annotator = _one(query, "annotator") or annotator_cookie(headers)
    with reading(viewer.sources) as reader:
        found = rt.next_item(
            reader, kind, annotator, viewer.rated_by(annotator, kind), _one(query, "after")
        )
    if found is None:
        return viewer.message(
            200,
            "Nothing left to rate",
            f"Every {KINDS[kind]} of the published copy has a rating of yours.",
        )
    return _redirect("/rate?" + urlencode({"kind": kind, "item": found}))


def rate_post(viewer: Viewer, form: Query) -> Response:
    """Land a rating sent from the rating form, then show what landed."""
    try:
        kind = _kind(form)
    except ViewerError as err:
        return viewer.message(400, "Not a rating", str(err))
    item_id = _one(form, "item")
    values = {d: _one(form, d) for d in DIMENSIONS[kind]}
    with reading(viewer.sources) as reader:
        item = rt.item(reader, kind, item_id) if item_id else None
    if item is None:
        return viewer.message(404, "Nothing to rate here", "The published copy has no such item.")
    annotator = _one(form, "annotator")
    try:
        annotator = rt.clean_annotator(annotator)
        landed = rt.land_rating(viewer.sources, kind, item_id, annotator, values)
    except (ViewerError, AnnotationError) as err:
        return _rate_page(viewer, item, annotator, values, str(err), 400)
    except WarehouseError as err:  # the live file held for longer than the landing layer waits
        return _rate_page(viewer, item, annotator, values, str(err), 503)
    viewer.remember(annotator, kind, item_id)
    shown = {
        "kind": kind,
        "item": item_id,
        "landing": landed.landing_id or "",
        "inserted": landed.inserted,
        "replaced": landed.replaced,
        "unchanged": landed.unchanged,
    }
    return _redirect(
        "/rated?" + urlencode(shown), **{"Set-Cookie": set_annotator_cookie(annotator)}
    )


def rated(viewer: Viewer, query: Query) -> Response:
    kind = _kind(query)
    landing = _one(query, "landing")
    if landing and not re.fullmatch(r"[0-9a-f]{12}", landing):
        landing = ""
    counts = {}
    for name in ("inserted", "replaced", "unchanged"):
        try:
            counts[name] = max(0, int(_one(query, name) or 0))
        except ValueError:
            counts[name] = 0
    return viewer.page(
        "rated.html",
        title="Rating landed" if landing else "Rating already landed",
        current="/rate",
        kind=kind,
        item_id=_one(query, "item"),
        landing=landing,
        counts=counts,
        live=viewer.sources.live,
    )
