"""Alerts after an audit run: a regression against the previous run, or a failed release gate.

The flow calls ``after_audit`` once, after the build and publishing. When the config has an
``alerts:`` block, it reads this run's rows of the mart ``run_comparison`` (each target
compared with its previous run) and the gate verdicts (``ableaudit.gates.evaluate``), and on
a regressed slice or a failed error-severity gate sends one JSON summary through a Prefect
block: a ``Webhook`` made from the configured URL, or a block saved under a name. Nothing
here fails the audit: a failed delivery is a warning in the log and in the flow's summary.
See docs/alerts.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ableaudit.config import AlertSettings, AuditConfig
from ableaudit.gates import GateReport, GateResultsMissing, evaluate
from ableaudit.warehouse.connection import connect

logger = logging.getLogger(__name__)

# Seconds between delivery attempts: the first retry after 2 s, every later one after 10 s.
RETRY_DELAYS_S = (2.0, 10.0)

# The columns of run_comparison an alert carries for each regressed slice (the contract's names).
SLICE_COLUMNS = (
    "task",
    "query_set",
    "metric",
    "slice",
    "slice_value",
    "n_units",
    "baseline_rate",
    "candidate_rate",
    "change",
    "change_ci_low",
    "change_ci_high",
    "p_value",
    "flag_rule",
)
# The columns of gate_results an alert carries for each failed rule.
RULE_COLUMNS = (
    "rule_id",
    "rule_kind",
    "severity",
    "model_id",
    "arm",
    "scope",
    "observed",
    "threshold",
    "ci_low",
    "ci_high",
    "n_pairs",
    "verdict",
    "message",
    "evidence_sql",
)


class AlertDeliveryError(RuntimeError):
    """The receiver did not take the alert; the message never holds the destination's URL."""


@dataclass
class AlertOutcome:
    """What happened to a run's alert: kept in the flow's summary as ``alert``."""

    triggered: list[str] = field(default_factory=list)
    """The reasons found (``regression``, ``gate_failure``) among those the config alerts on."""
    sent: bool = False
    """Whether the receiver accepted the alert."""
    destination: str = ""
    """Where it went, without a token: the block's TYPE/NAME, or the URL's scheme and host."""
    attempts: int = 0
    """Delivery attempts made."""
    error: str | None = None
    """Why nothing was sent although it should have been (delivery or reading failed)."""
    payload: dict[str, Any] | None = None
    """The JSON summary sent (None when no alert was due)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "triggered": self.triggered,
            "sent": self.sent,
            "destination": self.destination,
            "attempts": self.attempts,
            "error": self.error,
        }


def after_audit(
    warehouse: str | Path, run_id: str, cfg: AuditConfig, summary: Mapping[str, Any]
) -> dict[str, Any] | None:
    """Alert on this run when the config asks to; never raises. None: the config has no alerts."""
    settings = cfg.alerts
    if settings is None:
        return None
    log = _logger()
    if "published" not in summary:
        log.warning("alerts: the run was not built, so it was not compared; no alert checked")
        return AlertOutcome(
            error="not built: run_comparison and gate_results are unchanged"
        ).as_dict()
    try:
        outcome = check_and_send(warehouse, run_id, cfg, settings, summary.get("report"))
    except Exception as err:  # an alert never fails the audit
        outcome = AlertOutcome(error=f"alert not checked: {_without_urls(str(err))}")
        log.warning("alerts: %s", outcome.error)
    return outcome.as_dict()


def check_and_send(
    warehouse: str | Path,
    run_id: str,
    cfg: AuditConfig,
    settings: AlertSettings,
    report: str | None = None,
) -> AlertOutcome:
    """Read this run's comparison and gates; send the summary when a configured reason holds."""
    comparison = read_comparison(warehouse, run_id)
    gates, gates_note = read_gates(warehouse, run_id)
    payload = build_payload(
        audit=cfg.name,
        run_id=run_id,
        comparison=comparison,
        gates=gates,
        gates_note=gates_note,
        report=report,
        report_url_base=settings.report_url_base,
    )
    outcome = AlertOutcome(triggered=[r for r in payload["reasons"] if r in settings.when])
    log = _logger()
    if not outcome.triggered:
        log.info(
            "alerts: run %s: no regression and no failed gate among %s; nothing sent",
            run_id,
            ", ".join(settings.when),
        )
        return outcome
    outcome.payload = payload
    outcome.destination = describe_destination(settings)
    event = emit_alert_event(payload)
    if not (settings.webhook_url or settings.webhook_url_env or settings.block):
        outcome.sent = event is not None
        if outcome.sent:
            log.info("alerts: %s: Prefect event %s emitted", run_id, ALERT_EVENT)
        else:
            outcome.error = f"the Prefect event {ALERT_EVENT} was not emitted"
            log.warning("alerts: %s; the audit itself succeeded", outcome.error)
        return outcome
    try:
        outcome.attempts = deliver(payload, settings)
        outcome.sent = True
        log.info("alerts: %s sent to %s", " and ".join(outcome.triggered), outcome.destination)
    except AlertDeliveryError as err:
        outcome.attempts = settings.retries + 1
        outcome.error = str(err)
        log.warning(
            "alerts: the alert (%s) could not be delivered to %s after %d attempts: %s; "
            "the audit itself succeeded",
            " and ".join(outcome.triggered),
            outcome.destination,
            outcome.attempts,
            err,
        )
    return outcome


# The Prefect event a due alert emits, whatever its delivery: an automation can act on it.
ALERT_EVENT = "ableaudit.audit.alert"


def emit_alert_event(payload: Mapping[str, Any]) -> Any:
    """Emit ``ALERT_EVENT`` for the run, its payload the alert's summary (docs/alerts.md).

    Only inside a flow run: Prefect relates the event to the flow run and its deployment,
    which is what an automation filters on. Returns the event (None when none was emitted).
    """
    from prefect.context import FlowRunContext
    from prefect.events import emit_event

    if FlowRunContext.get() is None:
        return None
    try:
        return emit_event(
            event=ALERT_EVENT,
            resource={
                "prefect.resource.id": f"ableaudit.run.{payload['run_id']}",
                "prefect.resource.name": f"{payload['audit']} run {payload['run_id']}",
            },
            related=[
                {
                    "prefect.resource.id": f"ableaudit.model.{t['model_id']}",
                    "prefect.resource.role": "model",
                    "prefect.resource.name": t["model_id"],
                }
                for t in payload["targets"]
            ],
            payload=dict(payload),
        )
    except Exception as err:  # the event is a convenience; the webhook is the delivery
        _logger().warning("alerts: the Prefect event %s was not emitted: %s", ALERT_EVENT, err)
        return None


def read_comparison(warehouse: str | Path, run_id: str) -> list[dict[str, Any]]:
    """This run's rows of run_comparison against the previous run (it is the candidate), every flag."""
    con = connect(warehouse, read_only=True)
    try:
        if not _has_table(con, "run_comparison"):
            raise RuntimeError(
                f"the warehouse {warehouse} has no run_comparison table; build it with `ableaudit build`"
            )
        # a run may also be compared with a baseline a gate rule pins; the alert reads the
        # comparison with the previous run of its target
        columns = {r[0] for r in con.execute("describe run_comparison").fetchall()}
        previous = (
            "and list_contains(string_split(comparison, ','), 'previous') "
            if "comparison" in columns
            else ""
        )
        cur = con.execute(
            f"select * from run_comparison where candidate_run_id = ? {previous}"
            "order by model_id, arm, task, metric, slice, slice_value",
            [run_id],
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    finally:
        con.close()


def read_gates(warehouse: str | Path, run_id: str) -> tuple[GateReport, str | None]:
    """The gate verdicts of this run (``ableaudit.gates.evaluate``), and why there are none.

    A warehouse built without gates, or a run without verdicts, alerts on regressions alone;
    the note says so in the alert.
    """
    try:
        return evaluate(str(warehouse), run_id=run_id), None
    except (GateResultsMissing, ValueError) as err:
        return GateReport(), f"gates not evaluated: {err}"


def build_payload(
    *,
    audit: str,
    run_id: str,
    comparison: Sequence[Mapping[str, Any]],
    gates: GateReport,
    report: str | None,
    report_url_base: str | None = None,
    gates_note: str | None = None,
) -> dict[str, Any]:
    """The JSON summary of a run: why it alerts, each target's runs and regressed slices, failed rules.

    ``reasons`` is empty when nothing regressed and every error-severity gate passed.
    """
    targets: dict[tuple[str, str], dict[str, Any]] = {}
    for row in comparison:
        key = (row["model_id"], row["arm"])
        target = targets.setdefault(
            key,
            {
                "model_id": row["model_id"],
                "arm": row["arm"],
                "baseline_run_ids": [],
                "candidate_run_id": row["candidate_run_id"],
                "baseline_revisions": [],
                "candidate_revisions": [],
                "flags": {},
                "regressed": [],
            },
        )
        for name, value in (
            ("baseline_run_ids", row["baseline_run_id"]),
            ("baseline_revisions", row["baseline_revision"]),
            ("candidate_revisions", row["candidate_revision"]),
        ):
            if value is not None and value not in target[name]:
                target[name].append(value)
        flag = row["flag"] or "null"
        target["flags"][flag] = target["flags"].get(flag, 0) + 1
        if row["flag"] == "regressed":
            target["regressed"].append({c: _plain(row.get(c)) for c in SLICE_COLUMNS})
    failed, warned = gates.failed_errors, gates.failed_warnings
    regressed = sum(len(t["regressed"]) for t in targets.values())
    reasons = (["regression"] if regressed else []) + ([] if gates.ok else ["gate_failure"])
    report_info = {
        "path": report,
        "url": report_url(report, report_url_base) if report and report_url_base else None,
    }
    headline = (
        f"ableaudit {audit}, run {run_id}: "
        + (f"{regressed} regressed slice(s)" if regressed else "no regressed slice")
        + "; "
        + (
            f"{len(failed)} failed gate rule(s): {', '.join(sorted({r['rule_id'] for r in failed}))}"
            if failed
            else "every error gate passed"
        )
    )
    return {
        "kind": "ableaudit.audit_alert",
        "summary": headline,
        "audit": audit,
        "run_id": run_id,
        "reasons": reasons,
        "targets": list(targets.values()),
        "failed_rules": [{c: _plain(r.get(c)) for c in RULE_COLUMNS} for r in failed],
        "warnings": [{c: _plain(r.get(c)) for c in RULE_COLUMNS} for r in warned],
        "gates_evaluated": len(gates.rows),
        "gates_note": gates_note,
        "report": report_info,
    }


def report_url(report: str, base: str) -> str:
    """The served report's page: ``base`` is where the report folder is served."""
    return base.rstrip("/") + "/" + Path(report).name


def describe_destination(settings: AlertSettings) -> str:
    """Where an alert goes, fit for a log line: never a URL's path, query or credentials."""
    if settings.block:
        return f"block {settings.block}"
    if not (settings.webhook_url or settings.webhook_url_env):
        return f"Prefect event {ALERT_EVENT}"
    if settings.webhook_url_env:
        url = os.environ.get(settings.webhook_url_env, "")
        return f"{_host(url) or '(unset)'} (from ${settings.webhook_url_env})"
    return _host(settings.webhook_url or "")


def deliver(payload: dict[str, Any], settings: AlertSettings) -> int:
    """Send ``payload`` through the configured block; the attempts made. Raises AlertDeliveryError."""
    delays = [RETRY_DELAYS_S[min(i, len(RETRY_DELAYS_S) - 1)] for i in range(settings.retries)]
    error: AlertDeliveryError | None = None
    for attempt, delay in enumerate([0.0, *delays], start=1):
        time.sleep(delay)
        try:
            _send_once(payload, settings)
            return attempt
        except AlertDeliveryError as err:
            error = err
            _logger().info("alerts: attempt %d failed: %s", attempt, err)
    assert error is not None
    raise error


def _send_once(payload: dict[str, Any], settings: AlertSettings) -> None:
    from prefect.blocks.abstract import NotificationBlock
    from prefect.blocks.webhook import Webhook
    from prefect.utilities.asyncutils import run_coro_as_sync

    try:
        block = _block(settings)
        if isinstance(block, Webhook):
            response = run_coro_as_sync(asyncio.wait_for(block.call(payload), settings.timeout_s))
            if response.status_code >= 300:
                raise AlertDeliveryError(f"the receiver answered HTTP {response.status_code}")
        elif isinstance(block, NotificationBlock):
            with block.raise_on_failure():
                block.notify(body=_text(payload), subject=payload["summary"])
        else:
            raise AlertDeliveryError(
                f"block {settings.block} is a {type(block).__name__}, which sends no notification; "
                "save a Webhook block (or a notification block such as Slack) under that name"
            )
    except AlertDeliveryError:
        raise
    except Exception as err:
        message = _without_urls(str(err)) or "no message"
        raise AlertDeliveryError(f"{type(err).__name__}: {message}") from None


def _block(settings: AlertSettings) -> Any:
    """The Prefect block to send through: loaded by name, or a Webhook made from the URL."""
    from prefect.blocks.core import Block
    from prefect.blocks.webhook import Webhook

    if settings.block:
        return Block.load(settings.block)
    url = settings.webhook_url
    if settings.webhook_url_env:
        url = os.environ.get(settings.webhook_url_env)
        if not url:
            raise AlertDeliveryError(
                f"${settings.webhook_url_env} (alerts.webhook_url_env) is not set; export the "
                "receiver's URL in it"
            )
    return Webhook(url=url, method="POST", headers={"Content-Type": "application/json"})


def _text(payload: Mapping[str, Any]) -> str:
    """The summary as lines, for notification blocks that send text (Slack, Teams, e-mail)."""
    lines = [payload["summary"]]
    for t in payload["targets"]:
        for s in t["regressed"]:
            lines.append(
                f"- {t['model_id']} / {t['arm']}: {s['metric']} {s['slice']}={s['slice_value']} "
                f"{_num(s['baseline_rate'])} -> {_num(s['candidate_rate'])} "
                f"(change {_num(s['change'])}, 95% CI {_num(s['change_ci_low'])} to "
                f"{_num(s['change_ci_high'])})"
            )
    lines += [f"- gate {r['rule_id']} failed: {r['message']}" for r in payload["failed_rules"]]
    report = payload["report"]
    if report["url"] or report["path"]:
        lines.append(f"report: {report['url'] or report['path']}")
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _plain(value: Any) -> Any:
    """A value JSON can carry: numbers as float/int, times and the rest as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    try:
        return float(value)  # Decimal, numpy numbers
    except (TypeError, ValueError):
        return str(value)


def _has_table(con: Any, name: str) -> bool:
    return bool(
        con.execute(
            "select count(*) from information_schema.tables where table_name = ?", [name]
        ).fetchone()[0]
    )


_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def _host(url: str) -> str:
    m = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)(?:[^/@]*@)?([^/?#]*)", url)
    return f"{m.group(1)}{m.group(2)}" if m else ""


def _without_urls(text: str) -> str:
    """``text`` with each URL cut to its scheme and host: a webhook's path may hold its token."""
    return _URL.sub(lambda m: _host(m.group(0)) + "/...", text)


def _logger() -> logging.Logger | logging.LoggerAdapter:
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logger
