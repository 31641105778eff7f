"""dbt runs in-process through dbtRunner and lets go of the warehouse file afterwards."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ableaudit.dbt.runner import DbtError, run_dbt

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("dbt_env")]


def test_another_process_can_write_the_warehouse_after_a_run(warehouse):
    run_dbt(["seed", "--select", "domains"], warehouse)
    probe = "import duckdb, sys; c = duckdb.connect(sys.argv[1]); c.execute('select 1'); c.close()"
    out = subprocess.run(
        [sys.executable, "-c", probe, str(warehouse)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr


def test_a_failing_command_names_the_warehouse(warehouse):
    with pytest.raises(DbtError, match=str(warehouse.name)):
        run_dbt(["run-operation", "no_such_macro_anywhere"], warehouse)
