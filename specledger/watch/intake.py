"""The watch's first stage: read the log and cut it into requests. The follower reads the
file as `tail -F` does (follower.py), the stream cuts what it read into whole records
(stream.py), and one request recorder per server run (a file, or a server started again
within one) folds them into requests, each fired when its slot is released
(requests.py). The stage owns where reading got to (the log's row of `watch_cursors`)
and passes over the requests a resumed watch reads again that an earlier one recorded."""

import re
import time

from sqlalchemy import Engine

from adapters.llama.log.facts import ServerInfo
from specledger.watch.answers import AnswerFeed
from specledger.watch.follower import Chunk, LogFollower, Switch
from specledger.watch.options import WatchOptions
from specledger.watch.requests import Request, RequestRecorder
from specledger.watch.store import load_cursor, recorded_keys, save_cursor
from specledger.watch.stream import Piece, RecordStream, merge_facts
from specledger.watch.tally import WatchTally

_HEADER_BYTES = 1 << 21  # the server's start-up lines are read again on resume, up to this
_FIRST_TASK = re.compile(rb"\| task \d+ \| processing task")


class LogIntake:
    """Reads the log `opts.log` into requests, from where the last watch of it stopped;
    `answers`: the feed each released request waits for its answer from (None: answers
    are not followed)."""

    def __init__(self, engine: Engine, opts: WatchOptions, answers: AnswerFeed | None,
                 tally: WatchTally) -> None:
        self.engine, self.log, self.answers, self.tally = engine, str(opts.log), answers, tally
        cursor = load_cursor(engine, self.log)
        self.follower = LogFollower(opts.log, cursor, opts.read_limit)
        self.stream = RecordStream(opts.settle_s)
        self.recorder: RequestRecorder | None = None
        self.read_at = 0.0
        """When the last chunk was read: a request's lag is counted from it."""
        self._runs = 0  # server runs met so far: each recorder's requests carry its number
        self._last_facts = self.stream.server
        self._seen: set[str] = set()  # keys recorded by an earlier watch, beyond the cursor
        if self.follower.resumed and cursor is not None:
            tally.resumed_at = cursor.offset
            self._seen = recorded_keys(engine, self.log, cursor.offset)
            self.stream.reset(cursor.offset, cursor.line)
            self._read_header()
            self._new_recorder(self.stream.server, cursor.dev, cursor.ino, resumed=True)

    def _new_recorder(self, server: ServerInfo, dev: int, ino: int, resumed: bool) -> None:
        self._runs += 1
        self.recorder = RequestRecorder(server, self.log, dev, ino, resumed, self.answers,
                                        self._seen.__contains__, self._runs)

    def _read_header(self) -> None:
        """On resume: the server's facts from the file's start-up lines."""
        head = self.follower.head(_HEADER_BYTES)
        m = _FIRST_TASK.search(head)
        head = head[:head.rfind(b"\n", 0, m.start()) + 1] if m is not None else head
        head = head[:head.rfind(b"\n") + 1]
        if head:
            probe = RecordStream()
            probe.feed(head, 0, 1)
            probe.take(force=True)
            merge_facts(self.stream.server, probe.server)

    def poll(self) -> list[Chunk]:
        """The whole lines appended since the last poll, for `feed`."""
        return self.follower.poll()

    def feed(self, chunks: list[Chunk]) -> list[Request]:
        """Hand `chunks` to the stream; the requests a switch to another file ended."""
        done: list[Request] = []
        for chunk in chunks:
            if chunk.switch is not None or self.recorder is None:
                if chunk.switch is not None:
                    self.tally.switches.append(chunk.switch.value)
                    done += self._stop()
                    self._last_facts = self.stream.server
                self.stream.reset(chunk.start, chunk.line)
                self._new_recorder(self.stream.server, chunk.dev, chunk.ino,
                                   resumed=chunk.start > 0)
            self.read_at = time.monotonic()
            self.stream.feed(chunk.data, chunk.start, chunk.line)
        return self._unrecorded(done)

    def take(self) -> list[Request]:
        """The requests the lines known whole complete, and, with answers followed, the
        released ones whose answer came or whose wait is over."""
        done = self._take(force=False)
        if self.recorder is not None and self.answers is not None:
            done += self.recorder.ready(self.stream.counts)
        return self._unrecorded(done)

    def stop(self) -> list[Request]:
        """Every line read taken: the requests they complete, then those still being
        served, cut here."""
        return self._unrecorded(self._stop())

    def _stop(self) -> list[Request]:
        done = self._take(force=True)
        if self.recorder is not None:
            done += self.recorder.stop(self.stream.counts)
        return done

    def _take(self, force: bool) -> list[Request]:
        done: list[Request] = []
        while self.recorder is not None:
            pieces = self.stream.take(force)
            if not pieces:
                break
            for piece in pieces:
                if piece.restart:
                    done += self._restarted(piece)
                if piece.server.build is None and piece.records:
                    merge_facts(piece.server, self._last_facts)  # a log with no start-up
                done += self.recorder.feed(piece, self.stream.counts)
            if force:
                break
        return done

    def _restarted(self, piece: Piece) -> list[Request]:
        """A server started again in the file being read: the requests the one before left
        unfinished are recorded as incomplete (it is gone), and the new one's are folded
        from its own empty slots."""
        old = self.recorder
        assert old is not None
        self.tally.switches.append(Switch.RESTARTED.value)
        done = old.stop(self.stream.counts)
        self._last_facts = old.server
        self._new_recorder(piece.server, old.dev, old.ino, resumed=False)
        return done

    def _unrecorded(self, done: list[Request]) -> list[Request]:
        """`done` less the requests an earlier watch recorded (a resumed watch reads
        again from the first line of the oldest request it left in flight)."""
        fresh = []
        for req in done:
            if req.key in self._seen:
                self._seen.discard(req.key)
                self.tally.skipped += 1
            else:
                fresh.append(req)
        return fresh

    def save(self) -> None:
        """Save the offset reading resumes from: the first line of the oldest request
        still being served (what came before it is recorded), else the first line not
        yet read."""
        cur = self.follower.cursor()
        if cur is None or self.recorder is None:
            return
        if (cur.dev, cur.ino) != (self.recorder.dev, self.recorder.ino):
            return  # the follower moved on to the next file; its first chunk saves it
        open_at = self.recorder.open_lines()
        offset, line = min(open_at) if open_at else (self.stream.offset, self.stream.line)
        save_cursor(self.engine, self.log, self.follower.cursor_at(offset, line))

    def close(self) -> None:
        """Close the log."""
        self.follower.close()
