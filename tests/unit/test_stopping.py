"""The audit's stop request: the first SIGINT or SIGTERM cancels every live backend and lets
the audit end by itself; a second one ends the process at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

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


@pytest.mark.parametrize("stop", ["stop_on_signals(print)", "second_signal_exits()"])
def test_a_second_signal_ends_the_process_while_the_main_thread_is_in_native_code(stop):
    """Python runs a handler in the main thread only between two steps of Python code: here the
    main thread is in one call of native code that holds no lock on the interpreter and never
    looks at signals (PBKDF2 over a billion rounds, minutes), as it may be in DuckDB closing the
    warehouse or a library's native loop. The second signal still ends the process at once."""
    code = textwrap.dedent(
        f"""
        import hashlib, os, signal, sys, threading, time
        from ableaudit import stopping
        with stopping.{stop}:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.5)
            except KeyboardInterrupt:
                pass
            print("first", flush=True)
            threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
            hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 10**9)
            print("not reached", flush=True)
        """
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    took = time.monotonic() - started
    assert done.returncode == 143, done.stderr[-3000:]
    assert "first" in done.stdout and "not reached" not in done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "ableaudit: SIGTERM again: stopped at once. What had landed stays landed."
    )
    assert took < 30, took  # the native call alone runs for minutes


def test_a_stop_in_this_process_gives_back_the_signal_wakeup():
    """After a stop and ``reset`` (a new audit in the same process, a test), the interpreter's
    wakeup descriptor is what it was, and a signal no longer ends the process."""
    stopping.reset()
    before = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(before)
    try:
        with stopping.stop_on_signals(lambda _: None):
            os.kill(os.getpid(), signal.SIGINT)
            assert stopping.requested() == signal.SIGINT
            watching = signal.set_wakeup_fd(-1)
            signal.set_wakeup_fd(watching)
            assert watching not in (-1, before)  # the watch's pipe
    finally:
        stopping.reset()
    assert signal.set_wakeup_fd(before) == before
    received = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: received.append(s))
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        time.sleep(0.2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert received == [signal.SIGUSR1]


@pytest.mark.parametrize("stop", ["stop_on_signals(print)", "second_signal_exits()"])
def test_signals_another_thread_takes_end_the_process_while_the_main_thread_sleeps(stop):
    """The kernel gives a process's signal to any of its threads; one that another thread takes
    does not wake a main thread asleep in a wait (dbt's, for its next node), and Python would
    run no handler until the wait ends. Two such signals still end the process at once."""
    code = textwrap.dedent(
        f"""
        import os, signal, threading, time
        from ableaudit import stopping

        def send():
            time.sleep(0.5)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
            time.sleep(0.5)
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

        with stopping.{stop}:
            threading.Thread(target=send).start()
            print("asleep", flush=True)
            threading.Event().wait(300)
            print("not reached", flush=True)
        """
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    took = time.monotonic() - started
    assert done.returncode == 143, done.stderr[-3000:]
    assert "asleep" in done.stdout and "not reached" not in done.stdout
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "ableaudit: SIGTERM again: stopped at once. What had landed stays landed."
    )
    assert took < 60, took  # the wait alone lasts 300 s
