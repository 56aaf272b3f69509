"""The answers the clients got, followed as the log is: a JSON-lines file the clients
append their completion objects to (the format `import --responses` reads), each answer
held until a request of its shape is released and takes it (the import's own matching:
the first unused answer of the task's prompt length and generated tokens).

An answer may be written before or after its request's last log line: a released request
waits for one (at most `wait_s`, and only behind the earlier requests of its slot), then
is recorded without it. The held answers are bounded: beyond `MAX_HELD`, the oldest are
dropped. A resumed watch starts at the oldest answer it held and passes over
the lines it noted as taken."""

import hashlib
import json
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from adapters.llama.ledger.record import response_shape
from adapters.llama.ledger.responses import (
    ResponseFacts,
    Responses,
    ResponsesError,
    match_responses,
    response_facts,
)
from adapters.llama.ledger.tasks import LlamaTask
from specledger.watch.follower import READ_LIMIT, Cursor, LogFollower

MAX_HELD = 10_000


@dataclass(frozen=True)
class Answer:
    """One answer line: its facts as a one-answer `Responses` (with the line's digest),
    and where it is (the file `dev`/`ino`, the line's byte `offset` and number)."""

    responses: Responses
    dev: int
    ino: int
    offset: int
    line: int

    @property
    def facts(self) -> ResponseFacts:
        """The answer's counts."""
        return self.responses.facts[0]


class AnswerFeed:
    """Follows the answers file at `path` from `cursor` (through rotation and truncation,
    as the log, at most `read_limit` bytes a poll), passing over the lines in `taken`
    ((dev, ino, line)); `wait_s`: how long a released request waits for its answer."""

    def __init__(self, path: Path, wait_s: float, cursor: Cursor | None = None,
                 taken: set[tuple[int, int, int]] | None = None,
                 read_limit: int = READ_LIMIT) -> None:
        self.path = path
        self.wait_s = wait_s
        self.follower = LogFollower(path, cursor, read_limit)
        self.taken = taken or set()
        self.held: deque[Answer] = deque(maxlen=MAX_HELD)  # beyond it, the oldest go

    def poll(self) -> bool:
        """Read the answers appended since the last poll; whether any line came."""
        chunks = self.follower.poll()
        for chunk in chunks:
            offset = chunk.start
            for i, raw in enumerate(chunk.data.splitlines(keepends=True)):
                line = chunk.line + i
                if raw.strip() and (chunk.dev, chunk.ino, line) not in self.taken:
                    self._line(raw, chunk.dev, chunk.ino, offset, line)
                offset += len(raw)
        return bool(chunks)

    def _line(self, raw: bytes, dev: int, ino: int, offset: int, line: int) -> None:
        try:
            doc = json.loads(raw)
            facts = response_facts(line - 1, doc, str(self.path)) if isinstance(
                doc, dict) else None
        except (json.JSONDecodeError, UnicodeDecodeError, ResponsesError):
            facts = None
        if facts is None:  # no answer: not JSON, no timings, a bad count
            return
        digest = hashlib.sha256(raw.rstrip(b"\n")).hexdigest()
        self.held.append(Answer(Responses([facts], digest, 0), dev, ino, offset, line))

    def take(self, task: LlamaTask) -> Answer | None:
        """The held answer `task` matches, no longer held; None when none matches yet."""
        pick = match_responses([response_shape(task)], [a.facts for a in self.held])[0]
        if pick is None:
            return None
        answer = next(a for a in self.held if a.facts is pick)
        self.held.remove(answer)
        return answer

    def cursor(self) -> Cursor | None:
        """Where a later watch starts reading: the oldest answer still held in the file
        being read, else the first line not yet read (None: no file yet)."""
        cur = self.follower.cursor()
        if cur is None:
            return None
        first = next((a for a in self.held if (a.dev, a.ino) == (cur.dev, cur.ino)), None)
        return self.follower.cursor_at(first.offset, first.line) if first else cur

    def close(self) -> None:
        """Close the file."""
        self.follower.close()
