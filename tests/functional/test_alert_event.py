"""The Prefect event a due alert emits inside a flow run: what an automation triggers on
(docs/alerts.md)."""

from __future__ import annotations

import duckdb
from prefect import flow

from ableaudit.audit import alerts
from ableaudit.config import parse_config
from ableaudit.gates import GateReport

REGRESSED = {
    "model_id": "hosted",
    "arm": "baseline",
    "task": "text",
    "metric": "vader",
    "slice": "disability",
    "slice_value": "hearing",
    "baseline_run_id": "run-1",
    "candidate_run_id": "run-2",
    "baseline_revision": "m-1",
    "candidate_revision": "m-2",
    "n_units": 12,
    "baseline_rate": 0.0,
    "candidate_rate": 100.0,
    "change": 100.0,
    "change_ci_low": 100.0,
    "change_ci_high": 100.0,
    "p_value": 0.0005,
    "flag": "regressed",
    "flag_rule": "regressed when the CI of the change is above 0",
}


@flow(name="alert-only-event")
def _alert_without_destination(wh: str) -> dict:
    cfg = parse_config(
        {
            "targets": [{"name": "hosted", "backend": "openai", "model": "m"}],
            "alerts": {"when": ["regression"]},
        }
    )
    return alerts.after_audit(wh, "run-2", cfg, {"published": wh, "report": None})


@flow(name="alert-event")
def _emit(payload: dict):
    return alerts.emit_alert_event(payload)


def test_a_due_alert_is_a_prefect_event_of_its_flow_run():
    payload = alerts.build_payload(
        audit="reaudit",
        run_id="run-2",
        comparison=[REGRESSED],
        gates=GateReport(),
        report=None,
    )
    assert alerts.emit_alert_event(payload) is None  # outside a flow run: not emitted
    event = _emit(payload)
    assert event.event == alerts.ALERT_EVENT == "ableaudit.audit.alert"
    assert event.resource.id == "ableaudit.run.run-2"
    roles = {r.role: r.id for r in event.related}
    assert roles["model"] == "ableaudit.model.hosted"
    assert roles["flow-run"].startswith("prefect.flow-run.")  # Prefect relates it to the run
    assert event.payload["reasons"] == ["regression"]
    assert event.payload["targets"][0]["regressed"][0]["slice_value"] == "hearing"


def test_an_alerts_block_without_destination_emits_the_event_alone(tmp_path):
    wh = tmp_path / "wh.duckdb"
    con = duckdb.connect(str(wh))
    columns = ", ".join(f"{k} {_duck_type(v)}" for k, v in REGRESSED.items())
    con.execute(f"create table run_comparison ({columns})")
    con.execute(
        f"insert into run_comparison values ({', '.join('?' for _ in REGRESSED)})",
        list(REGRESSED.values()),
    )
    con.close()
    outcome = _alert_without_destination(str(wh))
    assert outcome["triggered"] == ["regression"] and outcome["sent"] is True
    assert outcome["destination"] == "Prefect event ableaudit.audit.alert"


def _duck_type(value) -> str:
    return (
        "double" if isinstance(value, float) else "bigint" if isinstance(value, int) else "varchar"
    )
