"""Per-call deadlines for in-process Python tools: a hung tool is stopped, not abandoned.

On the main thread (a Celery prefork worker, gunicorn's sync worker, the test runner) a real
interval timer raises ToolTimeout inside the tool, which interrupts sleeps and blocking reads
too. Off the main thread there are no signals; a watchdog raises ToolTimeout asynchronously in
the tool's thread instead, which stops Python code at its next bytecode (a blocking C call is
interrupted only when it returns). Either way the call ends in the caller's own thread: no
thread or process is left running behind the envelope.
"""

import ctypes
import signal
import threading
from contextlib import contextmanager


class ToolTimeout(BaseException):
    """The tool ran past its deadline and was stopped (a BaseException: a tool's `except Exception` cannot swallow it)."""


def _raise_timeout(signum, frame):
    raise ToolTimeout()


@contextmanager
def deadline(seconds: float):
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGALRM, _raise_timeout)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    target = threading.get_ident()
    done = threading.Event()
    fired = []

    def watchdog():
        if not done.wait(seconds):
            fired.append(True)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(ToolTimeout))

    guard = threading.Thread(target=watchdog, name="tool-deadline", daemon=True)
    guard.start()
    try:
        yield
    finally:
        done.set()
        guard.join()
        if fired:
            # The exception may not have been delivered yet if the tool finished just in time.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
