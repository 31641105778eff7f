"""The audit's stop request: the first SIGINT or SIGTERM cancels every live backend and lets
the audit end by itself; a second one ends the process at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ableaudit import stopping
from ableaudit.backends import make_backend
from ableaudit.config import Target
from tests.fixtures.openai_server import SERVED_ID, FakeOpenAIServer


@pytest.fixture
def server():
    s = FakeOpenAIServer()
    yield s
    s.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_cancels_live_backends_and_raises_nothing(server, signum):
    backend = make_backend(
        Target(
            name="t",
            backend="openai",
            model=SERVED_ID,
            base_url=server.base_url,
            api_key_env="ABLEAUDIT_TEST_NO_SUCH_KEY",
        )
    )
    said: list[str] = []
    stopping.reset()
    before = signal.getsignal(signum)
    try:
        with stopping.stop_on_signals(said.append):
            stopping.check()  # nothing asked yet
            os.kill(os.getpid(), signum)
            assert stopping.requested() == signum
            assert backend.cancelled
            with pytest.raises(stopping.Interrupted) as stop:
                stopping.check()
    finally:
        stopping.reset()
        backend.close()
    assert stop.value.signum == signum
    assert len(said) == 1 and "send it again to stop at once" in said[0]
    assert signal.getsignal(signum) is before  # the previous handler is back
    assert stopping.EXIT_STATUS[signum] == 128 + signum


def test_second_signal_ends_the_process_at_once():
    code = textwrap.dedent(
        """
        import os, signal, time
        from ableaudit import stopping
        with stopping.stop_on_signals(print):
            os.kill(os.getpid(), signal.SIGINT)
            print("still running", flush=True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
            print("not reached", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 130  # what a shell reports for SIGINT, not death by the signal
    assert "still running" in done.stdout and "not reached" not in done.stdout
    assert done.stderr.strip() == (
        "ableaudit: Ctrl-C (SIGINT) again: stopped at once. What had landed stays landed."
    )


def test_sigterm_after_ctrl_c_outside_generation_ends_with_143():
    code = textwrap.dedent(
        """
        import os, signal, time
        from ableaudit import stopping
        with stopping.second_signal_exits() as received:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(30)
            except KeyboardInterrupt:
                print("first", received, flush=True)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
            print("not reached", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 143
    assert "first [2]" in done.stdout and "not reached" not in done.stdout
    assert "Traceback" not in done.stderr and "SIGTERM again: stopped at once." in done.stderr
