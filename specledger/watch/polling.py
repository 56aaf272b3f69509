"""What every watcher shares, whatever the log it follows: a poll (`step`), a last read
when asked to stop (`finish`), the loop between them, with the metrics served while it
runs, and what could not be read, said."""

import threading

from specledger.watch.follower import LogFollower
from specledger.watch.options import WatchOptions
from specledger.watch.report import Reporter
from specledger.watch.tally import WatchTally

# Where reading got to is saved with each request (or run) recorded, and at least this often
# while a backlog is read with none completing, so a watch killed then resumes near there.
SAVE_EVERY_S = 1.0


class Polling:
    """A watcher: `opts`, the `report` stage (whose metrics are served), the `tally`."""

    opts: WatchOptions
    report: Reporter
    tally: WatchTally

    def step(self) -> bool:
        """One poll; whether it read anything."""
        raise NotImplementedError

    def finish(self) -> None:
        """Read what the log holds now, close what is open, save where reading got to."""
        raise NotImplementedError

    def say_gaps(self, followers: list[LogFollower]) -> None:
        """Say each stretch of the followed files that could not be read, and count it."""
        for follower in followers:
            gaps, follower.gaps = follower.gaps, []
            for gap in gaps:
                self.report.lost(follower.path, gap)

    def run(self, stop: threading.Event) -> WatchTally:
        """Poll until `stop` is set, then finish."""
        port = self.opts.metrics_port
        served = self.report.metrics.serve(port) if port is not None else None
        try:
            while not stop.is_set():
                if not self.step():
                    stop.wait(self.opts.poll_s)
            self.finish()
        finally:
            if served is not None:
                served.shutdown()
        return self.tally
