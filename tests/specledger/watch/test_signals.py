"""SIGTERM stops a watch wherever it lands, even inside the loop's wait on its stop event,
and a second signal interrupts at once."""

import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from specledger.watch.loop import stop_on_signals

ROOT = Path(__file__).parents[3]

# The main thread holds the event's lock where `Event.wait` holds it, between its checks
# of the flag, when the signal's handler runs: a handler that set the event itself waited
# there for its own thread's lock forever, and so did every later signal's. A child
# process, so that a hang is a timeout here and not the test run's.
_LANDS_IN_WAIT = textwrap.dedent("""
    import signal, threading
    from specledger.watch.loop import stop_on_signals

    stop = threading.Event()
    with stop_on_signals(stop):
        with stop._cond:
            signal.raise_signal(signal.SIGTERM)
        print("stopped" if stop.wait(30) else "not stopped")
""")


def test_a_signal_inside_the_wait_stops_the_watch() -> None:
    done = subprocess.run([sys.executable, "-c", _LANDS_IN_WAIT], cwd=ROOT, timeout=60,
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout.strip()) == (0, "stopped"), done.stderr


def test_the_second_signal_interrupts() -> None:
    stop, before = threading.Event(), signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt), stop_on_signals(stop):
        signal.raise_signal(signal.SIGTERM)
        assert stop.wait(30)
        signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGTERM) is before
