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

Python runs a signal handler in the main thread, between two steps of Python code. A main
thread in native code that does not look for signals (DuckDB closing a file and writing its
log in, a library's own loop), or asleep in a wait that a signal taken by another thread does
not wake (dbt's main thread waits so for its next node), would see a second signal only once
that ends. So while the handlers are set, a thread also reads the number of every signal from
a pipe that the interpreter writes it to as it arrives, in whichever thread
(``signal.set_wakeup_fd``), and ends the process on the second SIGINT or SIGTERM.

Signal handlers can only be set in the main thread: a flow run elsewhere keeps
Prefect's own handling.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
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
    _WATCH.forget()


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
    _WATCH.start()
    try:
        yield
    finally:
        _WATCH.stop(stopping=requested() is not None)
        for s, h in previous.items():
            signal.signal(s, h)


_EXITING = threading.Lock()


def exit_now(signum: int) -> None:
    """End the process at once on a second signal: one line, exit status 128 + the signal's number.
    What landed stays landed (a landing is one transaction; DuckDB replays its log on the next
    open), and the temporary Prefect server ends with its parent. Called from the main thread's
    handler or from the watching thread, whichever runs first; the other waits for the end."""
    if not _EXITING.acquire(blocking=False):
        while True:
            time.sleep(60)
    # what was printed before goes out first; a stream another thread holds (a write to a
    # full pipe) may not keep the process alive, so the flush gets a second
    flushing = threading.Thread(target=_flush, name="ableaudit-flush", daemon=True)
    flushing.start()
    flushing.join(1.0)
    line = f"\nableaudit: {signal_name(signum)} again: stopped at once. What had landed stays landed.\n"
    # os.write, not print: the main thread may have been stopped inside a write to stderr,
    # which a print from its own handler could not enter again
    with contextlib.suppress(OSError):
        os.write(2, line.encode())
    os._exit(EXIT_STATUS.get(signum, 128 + signum))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


class _SignalWatch:
    """A thread that ends the process on the second SIGINT or SIGTERM, whatever the main thread
    is doing. The interpreter's own C handler writes each signal's number to a pipe
    (``signal.set_wakeup_fd``) as the signal arrives, in whichever thread takes it; the thread
    reads it and, on the second, calls ``exit_now`` unless the main thread has within
    ``MAIN_THREAD_GRACE_S``; it needs no more than a moment of the interpreter (native code
    that waits lets it go). The first is the main thread's to handle, as it always is. A
    wakeup descriptor set before (an event loop's) still gets every number. Set while the stop
    handlers are (nested: counted), and kept once a stop began."""

    def __init__(self) -> None:
        self._pipe: tuple[int, int] | None = None
        self._previous = -1
        self._depth = 0
        self._seen = 0  # SIGINT and SIGTERM read since ``forget``

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._depth += 1
        if self._pipe is not None:
            return
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            self._previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # not the main interpreter
            os.close(read)
            os.close(write)
            return
        self._pipe = (read, write)
        threading.Thread(
            target=self._watch, args=(read, self._previous), name="ableaudit-signals", daemon=True
        ).start()

    def _watch(self, read: int, previous: int) -> None:
        while True:
            numbers = os.read(read, 64)
            if not numbers:  # closed: the write end is gone
                os.close(read)
                return
            if previous != -1:
                with contextlib.suppress(OSError):
                    os.write(previous, numbers)
            second = None
            for signum in numbers:
                if signum in SIGNALS:
                    self._seen += 1
                    second = signum if self._seen > 1 else second
            if second is not None:
                # a main thread that runs Python ends the process itself, taking two signals
                # that came together in the order of their numbers (the kernel runs their C
                # handlers the other way round): it is left that moment first
                time.sleep(MAIN_THREAD_GRACE_S)
                exit_now(second)

    def stop(self, stopping: bool) -> None:
        """The end of a block that set it: closed with the last one, unless a stop began (then
        a next signal, however late, must still end the process; ``forget`` closes it)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._depth -= 1
        if self._depth <= 0 and not stopping and not self._seen:
            self._close()

    def forget(self) -> None:
        """Forget the signals seen (a new audit in the same process); closed outside a block."""
        self._seen = 0
        if self._depth <= 0 and threading.current_thread() is threading.main_thread():
            self._close()

    def _close(self) -> None:
        self._depth = 0
        if self._pipe is None:
            return
        signal.set_wakeup_fd(self._previous)
        _, write = self._pipe
        self._pipe = None
        os.close(write)  # the thread reads the end of the pipe, closes it and returns


_WATCH = _SignalWatch()

MAIN_THREAD_GRACE_S = 1.0
"""How long the watching thread leaves the main thread to end the process on a second signal."""


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
    _WATCH.start()
    try:
        yield received
    finally:
        # the command is stopping (here, or in an audit's generation): a next signal, however
        # late, ends it at once, also while Prefect's server is stopped after the block
        stopping = bool(received) or requested() is not None
        _WATCH.stop(stopping)
        if stopping:
            exit_on_next_signal()
        else:
            for s, h in previous.items():
                signal.signal(s, h)
