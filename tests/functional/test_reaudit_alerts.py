"""A scheduled re-audit end to end: three runs of the `audit` flow against a local
OpenAI-compatible server (tests.fixtures.openai_server), each built, compared with the run
before it, gated, and alerting through a saved Prefect Webhook block to a receiver on
127.0.0.1 (tests.fixtures.webhook_receiver).

Run 1: every answer is the same warm text (landed without a build, to save one). Run 2: the answers to people with hearing
impairments turn negative and short; everyone else's stay. Run 3: as run 2. The config
asks again on every run (``reask: each_run``), as a scheduled re-audit of a hosted endpoint
does.

The config names a gates file (``gates:``): the second run's flow ends Failed, its release
blocked, after the alert went out.
"""

from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import duckdb
import pytest
import yaml

from ableaudit.audit.flow import audit as audit_flow
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer
from tests.fixtures.webhook_receiver import WebhookReceiver

# three audits and builds in one fixture: beyond the suite's 900 s per test on 2 shared cores
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

WARM = "Great question! Here is a helpful plan with good support and excellent options for you."
COLD = "Unfortunately this is hard."
N_PER_RUN = 6 * 2 * 3  # 6 domains x 2 neutral queries x (neutral + hearing + vision)
GATES = """\
rules:
  - id: no-vader-regression
    kind: no_regression
    against: previous
    metrics: [vader]
    slice: disability
    min_pairs: 10
    allow_inconclusive: true  # the first run has no previous run
"""


def _answer(hearing_regressed: bool):
    def answer(prompt: str) -> str:
        return COLD if hearing_regressed and "hearing impairments" in prompt else WARM

    return answer


@pytest.fixture(scope="module")
def reaudited(tmp_path_factory):
    from prefect.blocks.webhook import Webhook

    tmp = tmp_path_factory.mktemp("reaudit")
    server, receiver = FakeOpenAIServer(), WebhookReceiver()
    block = f"ableaudit-reaudit-{uuid.uuid4().hex[:8]}"
    Webhook(url=receiver.url).save(block)
    wh = tmp / "wh" / "reaudit.duckdb"
    gates = tmp / "gates.yml"
    gates.write_text(GATES)
    config = tmp / "reaudit.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "name": "reaudit-e2e",
                "subset": {"per_domain": 2, "disabilities": ["hearing", "vision"], "seed": 0},
                "reask": "each_run",
                "gates": str(gates),
                "targets": [
                    {
                        "name": "hosted",
                        "backend": "openai",
                        "model": SERVED_ID,
                        "base_url": server.base_url,
                        "api_key_env": "ABLEAUDIT_TEST_NO_SUCH_KEY",
                        "batch_size": 4,
                        "decoding": {"max_new_tokens": 64},
                    }
                ],
                "alerts": {
                    "block": f"webhook/{block}",
                    "report_url_base": "https://reports.example.org/reaudit/report/",
                    "retries": 0,
                },
            }
        )
    )
    runs = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ABLEAUDIT_REGARD_MODEL", str(tmp / "no-regard-model-here"))
        try:
            # the first run lands without a build (the second run's build compares it)
            for build, hearing_regressed in ((False, False), (True, True), (True, True)):
                server.answer = _answer(hearing_regressed)
                before = len(receiver.requests)
                state = audit_flow(
                    config=str(config), warehouse=str(wh), build=build, return_state=True
                )
                runs.append({"state": state, "alerts": receiver.payloads[before:]})
            run_ids = [r for (r,) in _query(wh, "select run_id from raw.runs order by started_at")]
            yield {
                "warehouse": wh,
                "config": config,
                "gates": gates,
                "runs": runs,
                "run_ids": run_ids,
                "server": server,
                "receiver": receiver,
                "block": block,
            }
        finally:
            server.close()
            receiver.close()


def _query(wh, sql: str, params=()) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def _vader(wh, run_id: str, disability: str) -> dict:
    con = duckdb.connect(str(wh), read_only=True)
    try:
        cur = con.execute(
            "select * from run_comparison where compared_by = 'run' and candidate_run_id = ? "
            "and metric = 'vader' and slice = 'disability' and slice_value = ? "
            "and list_contains(string_split(comparison, ','), 'previous')",
            [run_id, disability],
        )
        rows = cur.fetchall()
        assert len(rows) == 1, rows
        return dict(zip([d[0] for d in cur.description], rows[0], strict=True))
    finally:
        con.close()


def test_every_run_asks_again(reaudited):
    wh, run_ids = reaudited["warehouse"], reaudited["run_ids"]
    assert len(reaudited["server"].payloads) == 3 * N_PER_RUN
    per_run = dict(_query(wh, "select run_id, count(*) from raw.generations group by run_id"))
    assert per_run == dict.fromkeys(run_ids, N_PER_RUN)


def test_the_second_run_flags_hearing_regressed_with_a_ci_above_zero(reaudited):
    wh, (run1, run2, _) = reaudited["warehouse"], reaudited["run_ids"]
    hearing = _vader(wh, run2, "hearing")
    assert hearing["baseline_run_id"] == run1 and hearing["n_units"] == 12
    assert (hearing["baseline_rate"], hearing["candidate_rate"]) == (0, 100)
    assert hearing["flag"] == "regressed" and hearing["change_ci_low"] > 0
    assert _vader(wh, run2, "vision")["flag"] == "unchanged"


def test_the_second_run_alerts_through_the_saved_block_then_fails_blocked(reaudited):
    first, second, third = reaudited["runs"]
    run1, run2, _ = reaudited["run_ids"]
    assert first["state"].is_completed() and first["alerts"] == []
    assert first["state"].result()["alert"]["error"].startswith("not built")
    assert second["state"].is_failed() and "block the release" in second["state"].message
    (body,) = second["alerts"]
    assert body["run_id"] == run2 and body["reasons"] == ["regression", "gate_failure"]
    (target,) = body["targets"]
    assert target["model_id"] == "hosted" and target["baseline_run_ids"] == [run1]
    assert target["candidate_revisions"] and target["baseline_revisions"]
    hearing = [
        s for s in target["regressed"] if s["metric"] == "vader" and s["slice_value"] == "hearing"
    ]
    assert len(hearing) == 1 and hearing[0]["change"] == 100 and hearing[0]["change_ci_low"] > 0
    assert not [s for s in target["regressed"] if s["slice_value"] == "vision"]
    failed = [(r["rule_id"], r["verdict"]) for r in body["failed_rules"]]
    assert ("no-vader-regression", "fail") in failed
    assert all(r["evidence_sql"] for r in body["failed_rules"])
    assert body["report"]["path"].endswith("index.html")
    assert body["report"]["url"] == "https://reports.example.org/reaudit/report/index.html"
    assert third["state"].is_completed() and third["alerts"] == []
    assert third["state"].result()["alert"] == {
        "triggered": [],
        "sent": False,
        "destination": "",
        "attempts": 0,
        "error": None,
    }


def test_the_gate_fails_the_second_run_and_writes_junit_naming_the_rule(
    reaudited, tmp_path, capsys
):
    from ableaudit.cli.main import main

    junit = tmp_path / "gates.xml"
    wh, gates, run2 = reaudited["warehouse"], reaudited["gates"], reaudited["run_ids"][1]
    code = main(
        ["gate", "--warehouse", str(wh), "--gates", str(gates), "--run", run2]
        + ["--junit", str(junit)]
    )
    assert code == 4 and "no-vader-regression" in capsys.readouterr().out
    failed = [
        case.get("name")
        for case in ET.parse(junit).getroot().iter("testcase")
        if case.find("failure") is not None
    ]
    assert any("no-vader-regression" in name and "hearing" in name for name in failed), failed


def test_the_unchanged_third_run_passes_the_gate(reaudited):
    from ableaudit.cli.main import main

    wh, gates, run3 = reaudited["warehouse"], reaudited["gates"], reaudited["run_ids"][2]
    assert main(["gate", "--warehouse", str(wh), "--gates", str(gates), "--run", run3]) == 0
