"""The JUnit writer: the shape CI systems read, one testcase per verdict."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ableaudit.gates.junit import write_junit


def verdict(rule_id, verdict, severity="error", passed=None, scope="vader overall=all", **extra):
    passed = verdict == "pass" if passed is None else passed
    return {
        "rule_id": rule_id,
        "rule_kind": "degradation_max",
        "severity": severity,
        "model_id": "m",
        "arm": "baseline",
        "run_id": "r2",
        "scope": scope,
        "observed": 12.5,
        "threshold": 10.0,
        "ci_low": 8.0,
        "ci_high": 17.0,
        "n_pairs": 40,
        "verdict": verdict,
        "passed_for_gate": passed,
        "message": f'{rule_id}: {scope}: {verdict} <&> "quoted"',
        "evidence_sql": "select * from run_rates where cohort_id = 'r2'",
        **extra,
    }


def test_junit_follows_the_testsuites_shape(tmp_path):
    rows = [
        verdict("a", "pass"),
        verdict("b", "fail"),
        verdict("c", "inconclusive", severity="warn", passed=True),
        verdict("d", "inconclusive", passed=False),
        verdict("e", "inconclusive", passed=True, allow_inconclusive=True),
        verdict("f", "fail", severity="warn"),
        {**verdict("g", "pass"), "model_id": "other"},
    ]
    path = write_junit(rows, tmp_path / "out" / "gates.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == (
        "7",
        "3",
        "2",
        "0",
    )
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["m / baseline / run r2", "other / baseline / run r2"]
    assert suites[0].get("tests") == "6" and suites[0].get("failures") == "3"
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert set(cases) == {f"{x} [vader overall=all]" for x in "abcdefg"}
    assert all(c.get("classname") and c.get("time") == "0" for c in cases.values())
    assert list(cases["a [vader overall=all]"]) == [
        cases["a [vader overall=all]"].find("system-out")
    ]
    failure = cases["b [vader overall=all]"].find("failure")
    assert failure.get("message") == 'b: vader overall=all: fail <&> "quoted"'
    assert failure.get("type") == "fail" and "observed 12.5, threshold 10" in failure.text
    assert cases["d [vader overall=all]"].find("failure").get("type") == "inconclusive"
    assert cases["f [vader overall=all]"].find("failure").get("type") == "warning"
    for name in ("c", "e"):
        assert cases[f"{name} [vader overall=all]"].find("skipped") is not None
    # every child of a testcase is one JUnit knows
    for case in cases.values():
        assert {child.tag for child in case} <= {"failure", "skipped", "system-out"}
