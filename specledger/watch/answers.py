"""The answers the clients got, followed as the log is: a JSON-lines file the clients
append their completion objects to (the format `import --responses` reads), each answer
held until a request of its shape is released and takes it (the import's own matching:
the first unused answer of the task's prompt length and generated tokens).

An answer may be written before or after its request's last log line: a released request
waits for one (at most `wait_s`, and only behind the earlier requests of its slot), then
is recorded without it. The held answers are bounded: beyond `MAX_HELD`, the oldest are
dropped and counted."""

import hashlib
import json
from collections import deque
from pathlib import Path

from adapters.llama.ledger import response_shape
from adapters.llama.responses import (
    ResponseFacts,
    Responses,
    ResponsesError,
    match_responses,
    response_facts,
)
from adapters.llama.tasks import LlamaTask
from specledger.watch.follower import LogFollower

MAX_HELD = 10_000


class AnswerFeed:
    """Follows the answers file at `path` (through rotation and truncation, as the log);
    `wait_s`: how long a released request waits for its answer."""

    def __init__(self, path: Path, wait_s: float) -> None:
        self.path = path
        self.wait_s = wait_s
        self.follower = LogFollower(path)
        self.held: deque[ResponseFacts] = deque()
        self.read = 0       # answers read (the next one's index)
        self.unreadable = 0  # lines that were no answer: not JSON, no timings, a bad count
        self.dropped = 0    # answers never taken, dropped beyond MAX_HELD
        self._digests: dict[int, str] = {}

    def poll(self) -> bool:
        """Read the answers appended since the last poll; whether any line came."""
        chunks = self.follower.poll()
        for chunk in chunks:
            for raw in chunk.data.splitlines():
                if raw.strip():
                    self._line(raw)
        return bool(chunks)

    def _line(self, raw: bytes) -> None:
        try:
            doc = json.loads(raw)
            facts = response_facts(self.read, doc, str(self.path)) if isinstance(
                doc, dict) else None
        except (json.JSONDecodeError, UnicodeDecodeError, ResponsesError):
            facts = None
        if facts is None:
            self.unreadable += 1
            return
        self.read += 1
        self.held.append(facts)
        self._digests[facts.index] = hashlib.sha256(raw).hexdigest()
        while len(self.held) > MAX_HELD:
            self._digests.pop(self.held.popleft().index, None)
            self.dropped += 1

    def take(self, task: LlamaTask) -> Responses | None:
        """The held answer `task` matches, as a one-answer `Responses` (its line's digest),
        no longer held; None when none matches yet."""
        pick = match_responses([response_shape(task)], list(self.held))[0]
        if pick is None:
            return None
        self.held.remove(pick)
        return Responses([pick], self._digests.pop(pick.index), 0)

    def close(self) -> None:
        """Close the file."""
        self.follower.close()
