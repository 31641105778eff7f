"""Alerts after a run: the JSON summary built from run_comparison and gate_results rows, its
delivery to a webhook receiver on 127.0.0.1, and what happens when nothing is due or the
receiver is down. The marts are fabricated in a small DuckDB file with the columns the
marts declare."""

from __future__ import annotations

import logging

import duckdb
import pytest

from ableaudit.audit import alerts
from ableaudit.config import parse_config
from ableaudit.gates import GATE_COLUMNS, GateReport
from tests.fixtures.webhook_receiver import closed_port_url

RUN_1, RUN_2 = "run-1", "run-2"


REPORT = "/srv/wh/published/ableaudit/report/index.html"


def _comparison(**overrides) -> dict:
    row = {
        "model_id": "hosted",
        "arm": "baseline",
        "task": "text",
        "metric": "vader",
        "slice": "disability",
        "slice_value": "hearing",
        "baseline_run_id": RUN_1,
        "candidate_run_id": RUN_2,
        "baseline_revision": "m-2024-01",
        "candidate_revision": "m-2024-02",
        "n_units": 30,
        "baseline_rate": 10.0,
        "candidate_rate": 10.0,
        "change": 0.0,
        "change_ci_low": -5.0,
        "change_ci_high": 5.0,
        "p_value": 1.0,
        "flag": "unchanged",
        "flag_rule": "regressed when the 95% CI of the change excludes 0 and change > 0",
        "reason": None,
    }
    return row | overrides


REGRESSED = _comparison(
    slice_value="vision",
    candidate_rate=60.0,
    change=50.0,
    change_ci_low=32.5,
    change_ci_high=67.5,
    p_value=0.001,
    flag="regressed",
)


def _gate(**overrides) -> dict:
    row = {
        "rule_id": "max_degradation",
        "rule_kind": "max_rate",
        "severity": "error",
        "model_id": "hosted",
        "arm": "baseline",
        "run_id": RUN_2,
        "scope": "vader / disability=vision",
        "observed": 10.0,
        "threshold": 20.0,
        "ci_low": 5.0,
        "ci_high": 15.0,
        "n_pairs": 30,
        "verdict": "pass",
        "passed_for_gate": True,
        "message": "vader degradation 10.0% <= 20%",
        "evidence_sql": "select * from degradation where metric = 'vader'",
    }
    return row | overrides


FAILED_GATE = _gate(
    verdict="fail",
    passed_for_gate=False,
    observed=60.0,
    ci_low=45.0,
    ci_high=75.0,
    message="vader degradation 60.0% > 20% for disability=vision",
)


def _warehouse(tmp_path, comparison: list[dict], gates: list[dict] | None) -> str:
    """A DuckDB file holding the two marts (gate_results left out when ``gates`` is None)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(path))
    try:
        con.execute(
            """create table run_comparison (
                model_id varchar, arm varchar, task varchar, metric varchar, slice varchar,
                slice_value varchar, baseline_run_id varchar, candidate_run_id varchar,
                baseline_revision varchar, candidate_revision varchar, n_units bigint,
                baseline_rate double, candidate_rate double, change double,
                change_ci_low double, change_ci_high double, p_value double, flag varchar,
                flag_rule varchar, reason varchar, comparison varchar default 'previous')"""
        )
        for row in comparison:
            con.execute(
                f"insert into run_comparison by name select {', '.join('? as ' + k for k in row)}",
                list(row.values()),
            )
        if gates is not None:
            types = dict.fromkeys(("observed", "threshold", "ci_low", "ci_high"), "double")
            types |= {"n_pairs": "bigint", "passed_for_gate": "boolean"}
            columns = ", ".join(f"{c} {types.get(c, 'varchar')}" for c in GATE_COLUMNS)
            con.execute(f"create table gate_results ({columns}, run_started_at timestamp)")
            for row in gates:
                con.execute(
                    f"insert into gate_results by name select {', '.join('? as ' + k for k in row)}",
                    list(row.values()),
                )
    finally:
        con.close()
    return str(path)


def _config(**alerts_block):
    return parse_config(
        {
            "name": "reaudit",
            "targets": [{"name": "hosted", "backend": "openai", "model": "m"}],
            "alerts": {"retries": 0, **alerts_block},
        }
    )


def _summary(wh: str) -> dict:
    return {"run_id": RUN_2, "warehouse": wh, "published": wh, "report": REPORT}


def test_payload_names_the_runs_the_regressed_slices_and_the_failed_rules():
    warn = _gate(rule_id="judge_gap", severity="warn", verdict="fail", passed_for_gate=True)
    payload = alerts.build_payload(
        audit="reaudit",
        run_id=RUN_2,
        comparison=[_comparison(), REGRESSED, _comparison(metric="regard", flag="inconclusive")],
        gates=GateReport.from_rows([_gate(), FAILED_GATE, warn]),
        report=REPORT,
        report_url_base="https://reports.example.org/reaudit/report/",
    )
    assert payload["reasons"] == ["regression", "gate_failure"]
    (target,) = payload["targets"]
    assert target["model_id"] == "hosted" and target["arm"] == "baseline"
    assert target["baseline_run_ids"] == [RUN_1] and target["candidate_run_id"] == RUN_2
    assert target["baseline_revisions"] == ["m-2024-01"]
    assert target["candidate_revisions"] == ["m-2024-02"]
    assert target["flags"] == {"unchanged": 1, "regressed": 1, "inconclusive": 1}
    (slice_,) = target["regressed"]
    assert slice_["slice"] == "disability" and slice_["slice_value"] == "vision"
    assert (slice_["baseline_rate"], slice_["candidate_rate"], slice_["change"]) == (10, 60, 50)
    assert (slice_["change_ci_low"], slice_["change_ci_high"]) == (32.5, 67.5)
    (rule,) = payload["failed_rules"]
    assert rule["rule_id"] == "max_degradation" and rule["verdict"] == "fail"
    assert rule["message"] == FAILED_GATE["message"] and rule["evidence_sql"]
    assert [w["rule_id"] for w in payload["warnings"]] == ["judge_gap"]
    assert payload["report"] == {
        "path": REPORT,
        "url": "https://reports.example.org/reaudit/report/index.html",
    }
    assert "1 regressed slice" in payload["summary"] and "max_degradation" in payload["summary"]
    text = alerts._text(payload)
    assert "disability=vision 10.00 -> 60.00 (change 50.00, 95% CI 32.50 to 67.50)" in text


def test_an_inconclusive_error_rule_blocks_like_a_failed_one():
    blocked = _gate(verdict="inconclusive", passed_for_gate=False, message="too few pairs")
    payload = alerts.build_payload(
        audit="a",
        run_id=RUN_2,
        comparison=[_comparison()],
        gates=GateReport.from_rows([blocked]),
        report=None,
    )
    assert payload["reasons"] == ["gate_failure"]
    assert payload["report"] == {"path": None, "url": None}


def test_a_regression_and_a_failed_gate_reach_the_receiver_as_one_json_post(
    tmp_path, webhook_receiver
):
    wh = _warehouse(tmp_path, [_comparison(), REGRESSED], [_gate(), FAILED_GATE])
    cfg = _config(webhook_url=webhook_receiver.url)
    outcome = alerts.after_audit(wh, RUN_2, cfg, _summary(wh))
    assert outcome == {
        "triggered": ["regression", "gate_failure"],
        "sent": True,
        "destination": webhook_receiver.url.rsplit("/hooks", 1)[0],
        "attempts": 1,
        "error": None,
    }
    ((method, path, headers, body),) = webhook_receiver.requests
    assert (method, path) == ("POST", "/hooks/ableaudit")
    assert headers["content-type"] == "application/json"
    assert body["run_id"] == RUN_2 and body["reasons"] == ["regression", "gate_failure"]
    assert body["targets"][0]["regressed"][0]["slice_value"] == "vision"
    assert [r["rule_id"] for r in body["failed_rules"]] == ["max_degradation"]
    assert body["report"]["path"] == REPORT and body["gates_evaluated"] == 2


def test_nothing_is_sent_when_nothing_regressed_and_every_gate_passed(tmp_path, webhook_receiver):
    improved = _comparison(slice_value="speech", change=-20.0, flag="improved")
    wh = _warehouse(tmp_path, [_comparison(), improved], [_gate()])
    outcome = alerts.after_audit(wh, RUN_2, _config(webhook_url=webhook_receiver.url), _summary(wh))
    assert outcome["triggered"] == [] and outcome["sent"] is False and outcome["error"] is None
    assert webhook_receiver.requests == []


def test_only_the_configured_reasons_send(tmp_path, webhook_receiver):
    wh = _warehouse(tmp_path, [REGRESSED], [_gate()])
    cfg = _config(webhook_url=webhook_receiver.url, when=["gate_failure"])
    assert alerts.after_audit(wh, RUN_2, cfg, _summary(wh))["sent"] is False
    assert webhook_receiver.requests == []
    cfg = _config(webhook_url=webhook_receiver.url, when=["regression"])
    assert alerts.after_audit(wh, RUN_2, cfg, _summary(wh))["triggered"] == ["regression"]
    assert len(webhook_receiver.requests) == 1


def test_rows_of_other_runs_do_not_alert(tmp_path, webhook_receiver):
    earlier = REGRESSED | {"baseline_run_id": "run-0", "candidate_run_id": RUN_1}
    wh = _warehouse(tmp_path, [earlier, _comparison()], [_gate(), FAILED_GATE | {"run_id": RUN_1}])
    outcome = alerts.after_audit(wh, RUN_2, _config(webhook_url=webhook_receiver.url), _summary(wh))
    assert outcome["triggered"] == [] and webhook_receiver.requests == []


def test_only_the_comparison_with_the_previous_run_alerts(tmp_path, webhook_receiver):
    pinned = REGRESSED | {"baseline_run_id": "run-0", "comparison": "pinned"}
    wh = _warehouse(tmp_path, [pinned, _comparison()], [_gate()])
    cfg = _config(webhook_url=webhook_receiver.url)
    assert alerts.after_audit(wh, RUN_2, cfg, _summary(wh))["triggered"] == []
    both = REGRESSED | {"comparison": "previous,last_passing"}
    wh = _warehouse(tmp_path / "2", [pinned, both], [_gate()])
    assert alerts.after_audit(wh, RUN_2, cfg, _summary(wh))["sent"] is True
    (body,) = webhook_receiver.payloads
    assert body["targets"][0]["baseline_run_ids"] == [RUN_1]


def test_without_gate_results_a_regression_still_alerts_and_says_why(tmp_path, webhook_receiver):
    wh = _warehouse(tmp_path, [REGRESSED], gates=None)
    outcome = alerts.after_audit(wh, RUN_2, _config(webhook_url=webhook_receiver.url), _summary(wh))
    assert outcome["triggered"] == ["regression"] and outcome["sent"] is True
    (body,) = webhook_receiver.payloads
    assert body["gates_evaluated"] == 0 and "has no table gate_results" in body["gates_note"]


def test_a_receiver_that_is_down_is_a_warning_not_a_failure(tmp_path, caplog):
    wh = _warehouse(tmp_path, [REGRESSED], [FAILED_GATE])
    url = closed_port_url("/hooks/T0KEN-IN-THE-PATH")
    caplog.set_level(logging.INFO, logger="ableaudit")
    outcome = alerts.after_audit(wh, RUN_2, _config(webhook_url=url), _summary(wh))
    assert outcome["sent"] is False and outcome["attempts"] == 1
    assert outcome["error"].startswith("ConnectError")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "could not be delivered" in warnings[0].getMessage()
    assert "the audit itself succeeded" in warnings[0].getMessage()
    assert "T0KEN" not in caplog.text and "T0KEN" not in str(outcome)


def test_a_failed_attempt_is_retried_and_an_error_status_is_a_failure(
    tmp_path, webhook_receiver, monkeypatch
):
    monkeypatch.setattr(alerts, "RETRY_DELAYS_S", (0.01,))
    wh = _warehouse(tmp_path, [REGRESSED], [_gate()])
    webhook_receiver.fail_next = 1
    cfg = _config(webhook_url=webhook_receiver.url, retries=2)
    outcome = alerts.after_audit(wh, RUN_2, cfg, _summary(wh))
    assert outcome["sent"] is True and outcome["attempts"] == 2
    assert len(webhook_receiver.requests) == 2
    webhook_receiver.fail_next, webhook_receiver.fail_status = 5, 503
    outcome = alerts.after_audit(wh, RUN_2, cfg, _summary(wh))
    assert outcome == outcome | {"sent": False, "attempts": 3}
    assert outcome["error"] == "the receiver answered HTTP 503"
    assert len(webhook_receiver.requests) == 2 + 3


def test_the_url_can_come_from_the_environment(tmp_path, webhook_receiver, monkeypatch):
    wh = _warehouse(tmp_path, [REGRESSED], [_gate()])
    cfg = _config(webhook_url_env="ABLEAUDIT_TEST_ALERT_URL")
    monkeypatch.delenv("ABLEAUDIT_TEST_ALERT_URL", raising=False)
    outcome = alerts.after_audit(wh, RUN_2, cfg, _summary(wh))
    assert outcome["sent"] is False and "ABLEAUDIT_TEST_ALERT_URL" in outcome["error"]
    monkeypatch.setenv("ABLEAUDIT_TEST_ALERT_URL", webhook_receiver.url)
    assert alerts.after_audit(wh, RUN_2, cfg, _summary(wh))["sent"] is True
    assert len(webhook_receiver.payloads) == 1


def test_an_unbuilt_run_or_a_warehouse_without_marts_alerts_nothing(tmp_path, caplog):
    cfg = _config(webhook_url=closed_port_url())
    caplog.set_level(logging.WARNING, logger="ableaudit")
    outcome = alerts.after_audit("unused.duckdb", RUN_2, cfg, {"run_id": RUN_2})
    assert outcome["sent"] is False and outcome["error"].startswith("not built")
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    outcome = alerts.after_audit(str(empty), RUN_2, cfg, _summary(str(empty)))
    assert "has no run_comparison table" in outcome["error"]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


def test_without_a_destination_outside_a_flow_run_nothing_is_delivered(tmp_path, caplog):
    wh = _warehouse(tmp_path, [REGRESSED], [_gate()])
    caplog.set_level(logging.WARNING, logger="ableaudit")
    outcome = alerts.after_audit(wh, RUN_2, _config(), _summary(wh))
    assert outcome["destination"] == "Prefect event ableaudit.audit.alert"
    assert outcome["sent"] is False and "was not emitted" in outcome["error"]
    assert "was not emitted" in caplog.text


def test_no_alerts_block_means_no_check():
    cfg = parse_config({"targets": [{"name": "t", "backend": "openai", "model": "m"}]})
    assert alerts.after_audit("absent.duckdb", RUN_2, cfg, {"published": "x"}) is None


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:pw@hooks.example.org/services/T0/B0/SECRET", "https://hooks.example.org"),
        ("http://127.0.0.1:8123/x?token=SECRET", "http://127.0.0.1:8123"),
    ],
)
def test_a_destination_is_shown_without_its_path_or_credentials(url, shown):
    assert alerts.describe_destination(_config(webhook_url=url).alerts) == shown
    assert alerts._without_urls(f"error for url '{url}'") == f"error for url '{shown}/...'"
