"""The temporary Prefect server of an audit run without one: it never outlives the audit.

Without ``PREFECT_API_URL``, Prefect starts a temporary server (its "ephemeral"
mode) as a child process and stops it when the interpreter exits normally; a
killed audit left it running with no parent. ``temporary_server`` starts the
same server itself, through this module's ``__main__``, which ties the server
to the audit's process: on Linux the kernel sends it SIGTERM the moment the
audit dies (``PR_SET_PDEATHSIG``), and a watchdog thread checks the parent every
half second everywhere else. The server runs in a process group of its own, so a
Ctrl-C at the terminal reaches the audit alone, which can still report to the
server while it lands what finished; the audit stops the server when it ends.

``python -m ableaudit.audit.prefect_server PARENT_PID PORT [--pdeathsig]``
runs Prefect's server app under uvicorn, exactly as Prefect's own temporary
server does.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

WATCH_INTERVAL_S = 0.5
STOP_TIMEOUT_S = 5.0


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TemporaryServer:
    """A Prefect server on 127.0.0.1 that lives only as long as this process."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self, timeout_s: float) -> None:
        import httpx
        from prefect.settings import get_current_settings

        # PDEATHSIG fires when the *thread* that started the child ends: only from the main thread
        main = threading.current_thread() is threading.main_thread()
        env = {
            **os.environ,
            **get_current_settings().to_environment_variables(exclude_unset=True),
            "PREFECT_UI_ENABLED": "0",
            "PREFECT__SERVER_EPHEMERAL": "1",
            "PREFECT__SERVER_FINAL": "1",
        }
        env.pop("PREFECT_API_URL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid()), str(self.port)]
            + (["--pdeathsig"] if main else []),
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        with httpx.Client() as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"the temporary Prefect server exited with status {self.process.returncode}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.api_url}/health", timeout=2).status_code == 200:
                        return
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"the temporary Prefect server did not answer within {timeout_s:.0f} s; raise "
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS or set PREFECT_API_URL to a running "
            "server"
        )

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_server: TemporaryServer | None = None  # one per process, as Prefect's own


@contextlib.contextmanager
def temporary_server() -> Iterator[str | None]:
    """Within the block Prefect talks to a temporary server tied to this process (its API URL
    is yielded); with ``PREFECT_API_URL`` already set, that server is used (None).

    The server is started once per process and stopped when the process exits (or dies);
    the block sends Prefect's pending logs and events before it ends.
    """
    global _server
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
        temporary_settings,
    )

    if PREFECT_API_URL.value():
        yield None
        return
    if _server is None or not _server.running:
        _server = TemporaryServer()
        _server.start(float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value()))
        atexit.register(_server.stop)
    before = os.environ.get("PREFECT_API_URL")
    # threads that carry no Prefect context read the environment
    os.environ["PREFECT_API_URL"] = _server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: _server.api_url}):
            yield _server.api_url
    finally:
        _drain_prefect()
        if before is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = before


def stop_temporary_server() -> None:
    """Stop this process's temporary server now (before an exit that skips ``atexit``)."""
    if _server is not None:
        _server.stop()


def _drain_prefect() -> None:
    """Send the logs and events Prefect still holds while the server is up (at most 5 s each)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for service in (APILogWorker, EventsWorker):
        with contextlib.suppress(Exception):
            service.drain_all(timeout=5)


def _watch_parent(parent: int) -> None:
    """End this server when the audit that started it is gone."""
    if "--pdeathsig" in sys.argv and sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != parent:  # died before the watch began
        sys.exit(0)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main() -> None:
    parent, port = int(sys.argv[1]), int(sys.argv[2])
    _watch_parent(parent)
    import uvicorn

    uvicorn.run(
        "prefect.server.api.server:create_app",
        factory=True,
        host="127.0.0.1",
        port=port,
        log_level="error",
        lifespan="on",
        timeout_graceful_shutdown=2,  # an open events socket must not hold the shutdown
    )


if __name__ == "__main__":
    main()
