"""Which texts a scorer still has to score: the heart of 'score each text once'."""

from __future__ import annotations

from typing import Sequence

import ibis
import ibis.expr.types as ir


def pending_texts(
    generations: ir.Table,
    scored: ir.Table | None,
    scorer_version: str,
    retry_statuses: Sequence[str] = (),
) -> ir.Table:
    """Distinct (text_hash, response_text) not yet scored under ``scorer_version``.

    ``generations`` needs text_hash and response_text; ``scored`` (the scorer's own
    table, None on a first build) needs text_hash, scorer_version and status. Texts
    whose last attempt ended in one of ``retry_statuses`` count as not scored.
    """
    texts = (
        generations.filter(generations.response_text.notnull())
        .select("text_hash", "response_text")
        .distinct(on="text_hash", keep="first")
    )
    if scored is None:
        return texts
    done = scored.filter(scored.scorer_version == scorer_version)
    if retry_statuses:
        done = done.filter(~done.status.isin(list(retry_statuses)))
    return texts.anti_join(done.select("text_hash"), "text_hash")


def ibis_connection(session) -> "ibis.BaseBackend":
    """Wrap the DuckDB connection dbt hands a Python model (or any DuckDB connection)."""
    from ableaudit.warehouse import ibis_compat

    return ibis_compat.from_connection(getattr(session, "_cursor", session))
