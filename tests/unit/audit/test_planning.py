"""Planning under `reask`: whether a run's generation keys are its own."""

import pytest

from ableaudit.audit.planning import plan_task
from ableaudit.config import parse_config

PROMPTS = [
    {
        "prompt_id": f"s:q1:{side}",
        "query_set": "s",
        "query_id": "q1",
        "domain": "finance",
        "disability_id": None if side == "neutral" else side,
        "condition": "neutral" if side == "neutral" else "disability",
        "prompt_text": f"How do I save money ({side})?",
    }
    for side in ("neutral", "hearing", "vision")
]


def _keys(run_id: str | None, **over) -> list[str]:
    cfg = parse_config(
        {"targets": [{"name": "m", "backend": "openai", "model": "served"}], "samples": 2, **over}
    )
    return [
        g.generation_id
        for plan in plan_task(cfg, "text", PROMPTS, run_id=run_id)
        for g in plan.planned
    ]


def test_by_default_every_run_shares_the_keys_so_a_rerun_resumes():
    assert _keys(None) == _keys("run-a") == _keys("run-b")
    assert len(set(_keys(None))) == 6


def test_reask_each_run_gives_each_run_its_own_keys():
    a, b = _keys("run-a", reask="each_run"), _keys("run-b", reask="each_run")
    assert a == _keys("run-a", reask="each_run")  # the same run resumes its own requests
    assert len(set(a)) == len(set(b)) == 6
    assert not set(a) & set(b) and not set(a) & set(_keys(None))


def test_reask_each_run_needs_the_run_id():
    with pytest.raises(ValueError, match="pass the run_id"):
        _keys(None, reask="each_run")
