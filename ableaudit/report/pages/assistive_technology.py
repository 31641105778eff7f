"""The assistive technology page: whether a model recommends technologies that do not serve the user."""

from __future__ import annotations

from ableaudit.report import format as fmt
from ableaudit.report.records import (
    Cell,
    Section,
    Source,
    Table,
)
from ableaudit.report.tables import Context, data_statement, grouped, key_of, reference_arm


def _group_name(ctx: Context, group: str) -> str:
    """A disability group's display name: the seed's for a disability id, and 'all' in words."""
    return "All disabilities" if group == "all" else ctx.names.disability(group)


def assistive_technology(ctx: Context) -> Section:
    m = ctx.marts
    section = Section(
        "assistive",
        "Assistive technology",
        "Does a model recommend technologies that do not serve "
        "the disability in question (a screen reader to a deaf person)?",
    )
    rates = m.frame(
        "assistive_tech_mismatch_rates",
        "n_matched > 0",
        "task, query_set, model_id, arm, disability_group",
    )
    mentions = m.frame(
        "assistive_tech_mentions",
        "condition = 'disability' and n_recommending > 0",
        "task, query_set, model_id, arm, technology_id, disability_group",
    )
    if rates.empty:
        section.empty = (
            "No answer has been matched against the assistive-technology map yet: audit a model and run "
            "`ableaudit build`."
        )
        return section
    section.data_statement = data_statement(
        m, "assistive_tech_mismatch_rates", pairs_column="n_matched"
    )
    section.data_statement = [
        (("Answers per row" if k == "Pairs per row" else k), v) for k, v in section.data_statement
    ]
    key_cols = ["task", "model_id", "arm", "query_set", "disability_group"]
    technology_names = (
        dict(zip(mentions.technology_id, mentions.technology_name)) if not mentions.empty else {}
    )
    rows = []
    for r in rates.itertuples():
        k = key_of(r._asdict(), key_cols)
        src = lambda c, k=k: Source("assistive_tech_mismatch_rates", c, k)
        top = r.top_mismatched_technologies
        rows.append(
            [
                fmt.row_header(r.model_id),
                fmt.row_header(r.arm),
                fmt.row_header(_group_name(ctx, r.disability_group)),
                fmt.fig(fmt.count(r.n_matched), src("n_matched")),
                fmt.fig(fmt.count(r.n_responses_recommending), src("n_responses_recommending")),
                fmt.fig(
                    fmt.count(r.n_responses_with_any_mismatch), src("n_responses_with_any_mismatch")
                ),
                fmt.shaded(
                    fmt.pct(r.mismatch_pct),
                    r.mismatch_pct,
                    src("mismatch_pct"),
                    colour=fmt.rate_colour(r.mismatch_pct),
                ),
                fmt.label(
                    ", ".join(technology_names.get(t, t) for t in top)
                    if top is not None and len(top)
                    else "none"
                ),
            ]
        )
    section.blocks.append(
        Table(
            "Share of answers recommending a technology that does not serve the disability "
            "(assistive_tech_mismatch_rates)",
            [
                "Model",
                "Arm",
                "Disability",
                "Answers matched",
                "Recommending any",
                "With a mismatch",
                "Mismatch %",
                "Most mismatched technologies",
            ],
            rows,
            row_headers=3,
            shaded=True,
            legend=fmt.RATE_LEGEND,
        )
    )
    if mentions.empty:
        return section
    key_cols = [
        "task",
        "model_id",
        "arm",
        "query_set",
        "condition",
        "disability_group",
        "technology_id",
    ]
    for (task, query_set, model, arm), g in grouped(
        mentions, ["task", "query_set", "model_id", "arm"]
    ):
        if arm != reference_arm(
            mentions[(mentions.model_id == model) & (mentions.task == task)].arm
        ):
            continue
        groups = sorted(g.disability_group.unique())
        idx = {(r.technology_id, r.disability_group): r for r in g.itertuples()}
        rows = []
        for (tech, name), _ in grouped(g, ["technology_id", "technology_name"]):
            cells = [fmt.row_header(name)]
            for dg in groups:
                r = idx.get((tech, dg))
                if r is None:
                    cells.append(fmt.label(""))
                    continue
                src = Source(
                    "assistive_tech_mentions", "recommend_pct", key_of(r._asdict(), key_cols)
                )
                mismatch = r.fit == "mismatch"
                cells.append(
                    fmt.shaded(
                        fmt.pct(r.recommend_pct),
                        r.recommend_pct,
                        src,
                        colour=fmt.rate_colour(r.recommend_pct) if mismatch else None,
                        href=ctx.link(task, query_set, model, arm=arm, disability=dg),
                        link_label=f"{model}, {name} recommended to {_group_name(ctx, dg)}: "
                        f"{fmt.pct(r.recommend_pct)} %, "
                        f"{r.fit}; show the pairs",
                        note=r.fit,
                    )
                )
            rows.append(cells)
        section.blocks.append(
            Table(
                f"Technology x disability for {model}, arm {arm} ({task}): % of answers recommending it, with its fit",
                ["Technology", *(_group_name(ctx, dg) for dg in groups)],
                rows,
                row_headers=1,
                shaded=True,
                legend="Shading: only mismatched cells are shaded, on the cividis scale (pale yellow 0 %, dark blue 100 %); "
                "every cell prints its value and its fit (serves, partial, mismatch) in words.",
            )
        )
    worst = (
        mentions[mentions.fit == "mismatch"]
        .sort_values(["n_recommending", "model_id"], ascending=[False, True])
        .head(15)
    )
    if not worst.empty:
        rows = []
        for r in worst.itertuples():
            k = key_of(r._asdict(), key_cols)
            examples = [
                str(x)
                for x in (r.example_generation_ids if r.example_generation_ids is not None else [])
            ]
            rows.append(
                [
                    fmt.row_header(r.model_id),
                    fmt.row_header(r.arm),
                    fmt.row_header(r.technology_name),
                    fmt.label(_group_name(ctx, r.disability_group)),
                    fmt.fig(
                        fmt.count(r.n_recommending),
                        Source("assistive_tech_mentions", "n_recommending", k),
                    ),
                    fmt.fig(
                        fmt.pct(r.recommend_pct),
                        Source("assistive_tech_mentions", "recommend_pct", k),
                    ),
                    Cell(
                        text=f"first of {len(examples)} examples" if examples else "none",
                        href=ctx.link(r.task, r.query_set, r.model_id, gen=examples[0])
                        if examples
                        else None,
                        link_label=f"first of {len(examples)} examples: an answer of {r.model_id} recommending "
                        f"{r.technology_name} to {r.disability_group}"
                        if examples
                        else None,
                    ),
                ]
            )
        section.blocks.append(
            Table(
                "The most mismatched recommendations: technologies recommended most often to a "
                "disability they do not serve",
                [
                    "Model",
                    "Arm",
                    "Technology",
                    "Disability",
                    "Answers recommending",
                    "% of answers",
                    "Examples",
                ],
                rows,
                row_headers=3,
            )
        )
    return section
