"""The kill drill (tests.fixtures.kill_drill): the audit's generations, in a process of their own,
killed with SIGKILL at four seeded random points against a slow local server and resumed each
time. A kill may lose only what is in flight; nothing is lost or landed twice.

The audited process is the audit's generation step (``ableaudit.audit.generating``, the code
of the ``audit-target`` task, between ``start_run`` and ``finish_run``) on synthetic prompts, so
a start takes seconds; ``bench/kill_drill.py`` kills more often, and ``--cli`` there kills the
whole ``ableaudit audit`` command.
"""

from __future__ import annotations

import pytest

from tests.fixtures.kill_drill import drill


@pytest.mark.slow
def test_a_kill_loses_only_the_answers_in_flight(tmp_path):
    kills = 4
    d = drill(tmp_path, kills=kills, seed=20261201, prompts=40, batch_size=2, delay_s=0.05)
    print(d.report())
    assert d.killed_alive == [True] * kills, "every kill must hit a running audit"
    # nothing lost, nothing twice: every prompt answered exactly once
    assert d.duplicates == 0 and d.unasked == 0
    assert d.rows == d.answered == d.prompts
    # what was re-asked is what the kills lost, and no kill lost more than the window holds
    assert d.reasked == sum(d.lost)
    assert all(0 <= lost <= d.bound for lost in d.lost), d.lost
    assert d.reasked <= kills * d.bound
    # each run killed mid-run was found dead and marked so by the next; the last one completed.
    # A kill can land after a run answered the last prompts and marked itself completed (a
    # loaded machine, a late kill): that run counts as completed, and the next asks nothing
    finished = sum(d.completed_at_kill)
    assert finished < kills, "the kills must hit running audits"
    assert d.runs == {"interrupted": kills - finished, "completed": 1 + finished}
