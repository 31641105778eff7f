"""The `build-queryset` flow: personas -> validation -> queries -> validation -> land ->
(publish, when review is skipped) -> dbt build of the query-set marts.

`ableaudit queryset build` and `prefect deployment run 'build-queryset/build-queryset'` run
this same flow; the stages are ``ableaudit.queryset.build``'s.
"""

from __future__ import annotations

from typing import Any

from ableaudit.audit import prefect_env

prefect_env.configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from ableaudit.audit.tasks import network_task  # noqa: E402
from ableaudit.queryset.config import BuildConfig, load_build_config  # noqa: E402
from ableaudit.warehouse import warehouse_path  # noqa: E402

MARTS = ("+queryset_funnel", "+queryset_prompts")
"""What the flow builds after landing: the query-set marts and what they read."""


@network_task("queryset-stages")
def run_stages(wh: str, cfg: BuildConfig) -> dict[str, Any]:
    """Stages 1 to 4 (and publishing when review is skipped); a retry asks only for what
    has not landed."""
    from ableaudit.backends.registry import make_backend
    from ableaudit.queryset.build import build_query_set
    from ableaudit.queryset.generating import LazyBackend

    backend = LazyBackend(lambda: make_backend(cfg.generator))
    try:
        report = build_query_set(wh, cfg, backend, get_run_logger().info)
    finally:
        backend.close()
    get_run_logger().info(report.summary())
    return {"query_set": report.query_set, "stages": report.stages, "published": report.published}


@task(name="build-queryset-marts", cache_policy=NO_CACHE)
def build_marts(wh: str) -> None:
    from ableaudit.dbt.runner import run_dbt

    run_dbt(["build", "--select", "resource_type:seed", *MARTS], wh)


@flow(name="build-queryset")
def build_queryset(
    config: str = "configs/queryset.example.yaml",
    warehouse: str | None = None,
    build: bool = True,
) -> dict[str, Any]:
    """Build the query set of ``config`` into ``warehouse``; ``build``: then build its marts."""
    cfg = load_build_config(config)
    wh = str(warehouse_path(warehouse))
    result = run_stages(wh, cfg)
    if build:
        build_marts(wh)
    return result
