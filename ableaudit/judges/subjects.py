"""Selecting what the judges judge: the rubric judge's generations and the contrastive judge's pairs, read from the dbt models that pair them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.types as ir
from ibis.common.exceptions import TableNotFound

from ableaudit.warehouse import connect, ibis_compat, warehouse_path

#: The models the judges read, and everything upstream of them: the judge step builds them first.
SUBJECT_MODELS = "+int_pair_texts"


class SubjectsNotBuilt(RuntimeError):
    """The warehouse lacks the models the judges read; the message says how to build them."""


def build_subjects(warehouse: str | Path) -> None:
    """Build the models the judges read (stg_raw__generations, int_pairs, int_pair_texts).

    Pairing is a dbt rule (int_pairs); the judges read its result rather than
    pairing generations themselves, so a judge step that runs before the full
    warehouse build builds these first. They are incremental tables
    (docs/incremental.md): a generation landed after this build is paired at the next one,
    so build them again after landing and before selecting what to judge.
    """
    from ableaudit.dbt.selected import build_selected

    build_selected(warehouse, [SUBJECT_MODELS])


def open_subjects(warehouse: str | Path) -> ibis.BaseBackend:
    path = warehouse_path(warehouse)
    connect(
        path
    ).close()  # a fresh file gets its raw schema; then read without holding a write lock
    return ibis_compat.connect(path, read_only=True)


def subject_model(con: ibis.BaseBackend, name: str, warehouse: str | Path) -> ir.Table:
    try:
        return con.table(name)
    except TableNotFound:
        raise SubjectsNotBuilt(
            f"the warehouse {warehouse_path(warehouse)} has no {name}; build what the judges read first: "
            f"`dbt build --select {SUBJECT_MODELS}` (ableaudit.judges.runner.build_subjects; `ableaudit judge` does it)"
        ) from None


def in_scope(
    source: ir.Column, model_id: ir.Column, model_ids: Iterable[str] | None, include_imported: bool
) -> ir.BooleanColumn:
    """A generation the judges judge: one the audit made (of ``model_ids``), or an imported one when allowed."""
    generated = source != "imported"
    if model_ids is not None:
        generated = generated & model_id.isin(list(model_ids))
    return (generated | (source == "imported")) if include_imported else generated


def disability_labels(con: ibis.BaseBackend) -> dict[str, str]:
    # (not con.list_tables(): ibis 12 trips over duckdb 2.0's connection API there)
    try:
        seeds = con.table("stg_seeds__disabilities")
    except TableNotFound:
        return {}
    t = seeds.select("disability_id", "display_name").to_pyarrow().to_pylist()
    return {r["disability_id"]: r["display_name"] for r in t if r["display_name"]}


def select_rubric_subjects(
    warehouse: str | Path,
    *,
    query_set: str | None = None,
    model_ids: Iterable[str] | None = None,
    include_imported: bool = True,
) -> list[dict[str, Any]]:
    """Text generations with status 'ok' (stg_raw__generations), with the query they answer and the disability's name.

    Reads the same staged generations int_pairs pairs, so both kinds of judge
    see one version of the landed rows; build them first (``build_subjects``).
    """
    con = open_subjects(warehouse)
    try:
        g = subject_model(con, "stg_raw__generations", warehouse)
        g = g.filter(
            (g.status == "ok")
            & (g.task == "text")
            & in_scope(g.source, g.model_id, model_ids, include_imported)
        )
        if query_set is not None:
            g = g.filter(g.query_set == query_set)
        rows = (
            g.select(
                "generation_id",
                "model_id",
                "arm",
                "query_set",
                "query_id",
                "condition",
                "disability_id",
                "prompt_text",
                "response_text",
                "source",
            )
            .order_by(
                [
                    "model_id",
                    "arm",
                    "query_set",
                    "query_id",
                    "condition",
                    "disability_id",
                    "generation_id",
                ]
            )
            .to_pyarrow()
            .to_pylist()
        )
        labels = disability_labels(con)
    finally:
        con.disconnect()
    for r in rows:
        r["disability_label"] = (
            labels.get(r["disability_id"], r["disability_id"]) if r["disability_id"] else None
        )
    return rows


def select_pairs(
    warehouse: str | Path,
    *,
    query_set: str | None = None,
    model_ids: Iterable[str] | None = None,
    include_imported: bool = True,
) -> list[dict[str, Any]]:
    """The complete pairs of int_pairs (both sides 'ok'), with their texts from int_pair_texts.

    Pairing is int_pairs' rule, never redone here; build the models first
    (``build_subjects``). Both sides must be in scope. The texts are returned
    as the contrastive judge names them: question_a / response_a (neutral),
    question_b / response_b (disability-aware).
    """
    con = open_subjects(warehouse)
    try:
        p = subject_model(con, "int_pair_texts", warehouse)
        p = p.filter(
            (p.pair_status == "complete")
            & in_scope(p.neutral_source, p.model_id, model_ids, include_imported)
            & in_scope(p.disability_source, p.model_id, model_ids, include_imported)
        )
        if query_set is not None:
            p = p.filter(p.query_set == query_set)
        pairs = p.select(
            "pair_id",
            "neutral_generation_id",
            "disability_generation_id",
            "task",
            "model_id",
            "arm",
            "query_set",
            "query_id",
            "disability_id",
            "temperature",
            "sample_index",
            question_a=p.neutral_prompt_text,
            response_a=p.neutral_response_text,
            question_b=p.disability_prompt_text,
            response_b=p.disability_response_text,
        )
        rows = (
            pairs.order_by(
                [
                    "model_id",
                    "arm",
                    "query_set",
                    "query_id",
                    "disability_id",
                    "sample_index",
                    "neutral_generation_id",
                    "disability_generation_id",
                ]
            )
            .to_pyarrow()
            .to_pylist()
        )
    finally:
        con.disconnect()
    return rows
