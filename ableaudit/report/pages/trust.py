"""The trust page: the judges' readability, their agreement with people, and data quality."""

from __future__ import annotations

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Heading,
    Paragraph,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import Context, data_statement, grouped, key_of, none_if_missing


def trust(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "trust",
        "Trust: judges, agreement and data quality",
        "Can the numbers above be trusted: how readable were the judges, do they agree with people, "
        "and what was excluded?",
    )
    jq = m.frame("judgment_quality", "", "judge_kind, judge_name, prompt_version")
    ag = m.frame("agreement", "", "dimension, kind_pair, rater_a, rater_b")
    aa = m.frame("annotator_agreement", "", "dimension, rater_kind")
    dq = m.frame(
        "data_quality",
        "area in ('generation', 'pair')",
        "task, model_id, arm, run_id, area, status",
    )
    rr = m.frame(
        "refusal_rates",
        "source = 'any' and disability_group in ('neutral', 'all')",
        "task, query_set, model_id, arm, condition",
    )
    section.data_statement = data_statement(m, "data_quality", pairs_column="__none__")
    section.blocks.append(Heading("Judge quality"))
    if jq.empty:
        section.blocks.append(
            Paragraph(
                "No judge verdict was landed: add `judges` to the audit config (or import "
                "verdicts) to judge the answers."
            )
        )
    else:
        cols = [
            ("n_verdicts", fmt.count),
            ("n_parsed", fmt.count),
            ("n_repaired", fmt.count),
            ("n_unparseable", fmt.count),
            ("n_call_errors", fmt.count),
            ("usable_pct", fmt.pct),
            ("n_spans_not_found", fmt.count),
        ]
        rows = []
        for r in jq.itertuples():
            k = key_of(
                r._asdict(),
                [
                    "judge_name",
                    "judge_model",
                    "judge_revision",
                    "judge_kind",
                    "prompt_version",
                    "source",
                ],
            )
            rows.append(
                [
                    fmt.row_header(r.judge_name),
                    fmt.row_header(r.judge_kind),
                    fmt.label(r.judge_model),
                    fmt.label(r.prompt_version),
                ]
                + [fmt.fig(f(getattr(r, c)), Source("judgment_quality", c, k)) for c, f in cols]
            )
        section.blocks.append(
            Table(
                "How readable each judge's output was (judgment_quality)",
                [
                    "Judge",
                    "Kind",
                    "Model",
                    "Prompt",
                    "Verdicts",
                    "Parsed",
                    "Repaired",
                    "Unparseable",
                    "Call errors",
                    "Usable %",
                    "Quoted spans not found",
                ],
                rows,
                row_headers=2,
            )
        )
    section.blocks.append(Heading("Agreement"))
    if ag.empty:
        section.blocks.append(
            Paragraph(
                "No two raters rated the same items: import human ratings "
                "(`ableaudit import annotations`) or train a detector to fill the agreement tables."
            )
        )
    else:
        rows = []
        for r in ag.itertuples():
            k = key_of(r._asdict(), ["dimension", "rater_a", "rater_b"])
            src = lambda c, k=k: Source("agreement", c, k)
            rows.append(
                [
                    fmt.row_header(r.kind_pair),
                    fmt.row_header(r.dimension),
                    fmt.row_header(r.rater_a),
                    fmt.row_header(r.rater_b),
                    fmt.fig(fmt.count(r.n_items), src("n_items")),
                    fmt.fig(fmt.number(r.spearman_rho), src("spearman_rho")),
                    fmt.fig(fmt.number(r.cohen_kappa), src("cohen_kappa")),
                    fmt.fig(fmt.number(r.kappa_quadratic), src("kappa_quadratic")),
                    fmt.fig(fmt.number(r.accuracy), src("accuracy")),
                    fmt.label(r.reason if not fmt.missing(r.reason) else ""),
                ]
            )
        section.blocks.append(
            Table(
                "Agreement of two raters: judge vs human, detector vs judge, human vs human "
                "(agreement)",
                [
                    "Comparison",
                    "Dimension",
                    "Rater A",
                    "Rater B",
                    "Items",
                    "Spearman rho",
                    "Cohen's kappa",
                    "Quadratic kappa",
                    "Exact agreement",
                    "Why a value is missing",
                ],
                rows,
                row_headers=4,
            )
        )
        if not aa.empty:
            rows = []
            for r in aa.itertuples():
                k = key_of(r._asdict(), ["dimension", "rater_kind"])
                src = lambda c, k=k: Source("annotator_agreement", c, k)
                rows.append(
                    [
                        fmt.row_header(r.rater_kind),
                        fmt.row_header(r.dimension),
                        fmt.fig(fmt.count(r.n_annotators), src("n_annotators")),
                        fmt.fig(fmt.count(r.n_items), src("n_items")),
                        fmt.fig(fmt.number(r.fleiss_kappa), src("fleiss_kappa")),
                        fmt.fig(fmt.number(r.krippendorff_alpha), src("krippendorff_alpha")),
                        fmt.label(r.reason if not fmt.missing(r.reason) else ""),
                    ]
                )
            section.blocks.append(
                Table(
                    "Agreement of all raters of one kind (annotator_agreement)",
                    [
                        "Raters",
                        "Dimension",
                        "Raters counted",
                        "Items",
                        "Fleiss' kappa",
                        "Krippendorff's alpha",
                        "Why a value is missing",
                    ],
                    rows,
                    row_headers=2,
                )
            )
    section.blocks.append(Heading("Data quality"))
    if dq.empty:
        section.blocks.append(Paragraph("The data_quality mart is empty: nothing has landed yet."))
    else:
        statuses = {
            area: sorted(dq[dq.area == area].status.unique()) for area in ("generation", "pair")
        }
        idx = {
            (r.run_id, r.task, r.model_id, r.arm, r.query_set, r.area, r.status): r
            for r in dq.itertuples()
        }
        rows = []
        for (task, model, arm, query_set, run), _ in grouped(
            dq, ["task", "model_id", "arm", "query_set", "run_id"]
        ):
            run = none_if_missing(run)
            cells = [
                fmt.row_header(model),
                fmt.row_header(arm),
                fmt.row_header(task),
                fmt.row_header(run or "none"),
            ]
            for area in ("generation", "pair"):
                for st in statuses[area]:
                    r = idx.get((run, task, model, arm, query_set, area, st))
                    cells.append(
                        fmt.label("0")
                        if r is None
                        else fmt.fig(
                            fmt.count(r.n_rows),
                            Source(
                                "data_quality",
                                "n_rows",
                                key_of(
                                    r._asdict(),
                                    [
                                        "run_id",
                                        "task",
                                        "model_id",
                                        "arm",
                                        "query_set",
                                        "area",
                                        "status",
                                    ],
                                ),
                            ),
                        )
                    )
            rows.append(cells)
        section.blocks.append(
            Table(
                "Generations and pairs by status, per model, arm and run (data_quality; a 0 means no row has that status)",
                ["Model", "Arm", "Task", "Run"]
                + [st for a in ("generation", "pair") for st in statuses[a]],
                rows,
                row_headers=4,
                column_groups=[("", 4)]
                + [(f"{a}s", len(statuses[a])) for a in ("generation", "pair") if statuses[a]],
            )
        )
        section.blocks.append(
            Paragraph(
                "Data quality: every exclusion, by area, metric and status", "data-quality.html"
            )
        )
    if not rr.empty:
        rows = []
        for (task, _query_set, model, arm), g in grouped(
            rr, ["task", "query_set", "model_id", "arm"]
        ):
            cells = [fmt.row_header(model), fmt.row_header(arm), fmt.row_header(task)]
            for group in ("neutral", "all"):
                x = g[g.disability_group == group]
                if x.empty:
                    cells += [fmt.label(fmt.NA)] * 2
                    continue
                r = x.iloc[0]
                k = key_of(
                    r,
                    [
                        "task",
                        "model_id",
                        "arm",
                        "query_set",
                        "condition",
                        "disability_group",
                        "source",
                    ],
                )
                cells += [
                    fmt.fig(fmt.count(r.n_assessed), Source("refusal_rates", "n_assessed", k)),
                    fmt.fig(fmt.pct(r.refusal_pct), Source("refusal_rates", "refusal_pct", k)),
                ]
            rows.append(cells)
        section.blocks.append(
            Table(
                "Refusals by any source, neutral against disability-aware prompts (refusal_rates)",
                ["Model", "Arm", "Task", "answers", "refused %", "answers", "refused %"],
                rows,
                row_headers=3,
                column_groups=[("", 3), ("neutral prompts", 2), ("disability-aware prompts", 2)],
            )
        )
    return section
