"""Stopping an audit on Ctrl-C (SIGINT) or SIGTERM: land what finished, then end.

The first signal asks every live backend to cancel: llama.cpp and transformers
stop between two tokens, an HTTP backend stops waiting for the replies in
flight. Each target then lands the answers that had finished, the run is marked
'interrupted' in raw.runs, and the flow raises ``Interrupted``. Nothing that was
cut off lands (not even as an error), so running the same command again asks
for exactly what is missing. A second signal ends the process at once with exit
status 130 (SIGINT) or 143 (SIGTERM) and one line, no traceback (what landed stays
landed: each landing is one transaction; the run is marked 'interrupted' by the next
audit of the warehouse). ``second_signal_exits`` does the same for every other command:
the first signal stops it as Ctrl-C does (dbt cancels its queries), the second ends it.

Signal handlers can only be set in the main thread: a flow run elsewhere keeps
Prefect's own handling.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from ableaudit.backends import cancel_backends

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}
"""The exit status of a stopped audit: 128 + the signal's number, as a shell reports it."""

_requested: list[int] = []  # the signals received since ``reset``


class Interrupted(Exception):
    """The audit was asked to stop (``signum``) and stopped at a point where nothing is lost."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal_name(signum)}")
        self.signum = signum


def signal_name(signum: int) -> str:
    return "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name


def requested() -> int | None:
    """The signal that asked the audit to stop, or None."""
    return _requested[0] if _requested else None


def request(signum: int) -> None:
    """Ask the audit to stop, as the first SIGINT or SIGTERM does: cancel every live backend."""
    _requested.append(signum)
    cancel_backends()


def reset() -> None:
    """Forget an earlier stop request (a new audit starts in the same process)."""
    _requested.clear()


def check() -> None:
    """Raise ``Interrupted`` if a stop was asked for (called between the audit's steps)."""
    if (signum := requested()) is not None:
        raise Interrupted(signum)


@contextlib.contextmanager
def stop_on_signals(say: Callable[[str], None]) -> Iterator[None]:
    """Within the block, the first SIGINT or SIGTERM requests a stop (``say`` tells the user);
    a second one ends the process at once. The previous handlers come back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: object) -> None:
        if requested() is not None:
            exit_now(signum)
        request(signum)
        say(
            f"{signal_name(signum)}: stopping; the answers that finished are being landed "
            "(send it again to stop at once)"
        )

    previous = {s: signal.signal(s, handle) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def exit_now(signum: int) -> None:
    """End the process at once on a second signal: one line, exit status 128 + the signal's number.
    What landed stays landed (a landing is one transaction; DuckDB replays its log on the next
    open), and the temporary Prefect server ends with its parent."""
    print(
        f"\nableaudit: {signal_name(signum)} again: stopped at once. What had landed stays landed.",
        file=sys.stderr,
    )
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(EXIT_STATUS.get(signum, 128 + signum))


def exit_on_next_signal() -> None:
    """A command stopping on a first signal: a next one, however late, ends it at once."""
    if threading.current_thread() is threading.main_thread():
        for s in SIGNALS:
            signal.signal(s, lambda signum, frame: exit_now(signum))


_INTERRUPTS: list[type[KeyboardInterrupt]] = [KeyboardInterrupt]


@contextlib.contextmanager
def interrupting_with(kind: type[KeyboardInterrupt]) -> Iterator[None]:
    """Within the block, ``second_signal_exits`` raises ``kind`` on the first signal (dbt prints
    a traceback for a plain KeyboardInterrupt, not for one that is also its own exception)."""
    _INTERRUPTS.append(kind)
    try:
        yield
    finally:
        _INTERRUPTS.pop()


@contextlib.contextmanager
def second_signal_exits() -> Iterator[list[int]]:
    """Within the block, the first SIGINT or SIGTERM raises KeyboardInterrupt (what Ctrl-C does:
    dbt cancels its queries and ends), a second one ends the process at once (``exit_now``).
    Yields the signals received."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handle(signum: int, frame: object) -> None:
        if received or requested() is not None:  # the first stopped an audit's generation
            exit_now(signum)
        received.append(signum)
        raise _INTERRUPTS[-1]()

    previous = {s: signal.signal(s, handle) for s in SIGNALS}
    try:
        yield received
    finally:
        if received:  # the command is stopping: a next signal, however late, ends it at once
            exit_on_next_signal()
        else:
            for s, h in previous.items():
                signal.signal(s, h)
