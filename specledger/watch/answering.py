"""The watch's optional stage: the clients' answers (`--responses-from`), followed under
a key of its own, since one answers file may hold the answers of several servers'
clients and each watch keeps its own place in it: where reading it got to, and the
answer lines its requests took, so a resumed watch neither misses one nor lets a second
request take it. A request recorded without its answer is said."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from specledger.watch.answers import AnswerFeed
from specledger.watch.options import WatchOptions
from specledger.watch.requests import Request
from specledger.watch.store import (
    forget_answers,
    load_cursor,
    note_answer,
    save_cursor,
    taken_answers,
)
from specledger.watch.tally import WatchTally


def answers_key(log: str, responses: Path) -> str:
    """Where a watch of `log` keeps its cursor and notes on the answers file."""
    return f"{responses} (answers to {log})"


class AnswerStage:
    """Follows `responses` for the watch of `opts.log`, from where the last one stopped;
    `note` says a thing (a document, or its line)."""

    def __init__(self, engine: Engine, opts: WatchOptions, responses: Path,
                 tally: WatchTally, note: Callable[[dict[str, Any], str], None]) -> None:
        self.engine, self.tally, self.note = engine, tally, note
        self.key = answers_key(str(opts.log), responses)
        self.feed = AnswerFeed(responses, opts.answer_wait_s, load_cursor(engine, self.key),
                               taken_answers(engine, self.key), opts.read_limit)

    def poll(self) -> bool:
        """Read the answers appended since the last poll; whether any line came."""
        return self.feed.poll()

    def settle(self, req: Request) -> None:
        """Note the answer `req` took (no later watch holds it again), or say that it is
        recorded without one."""
        if req.unanswered:
            self.tally.unanswered += 1
            feed = self.feed
            self.note({"unanswered": {"task": req.task.task, "slot": req.task.slot,
                                      "log_line": req.last_line, "responses": str(feed.path),
                                      "wait_s": feed.wait_s}},
                      f"task {req.task.task} (slot {req.task.slot}, log line "
                      f"{req.last_line}): no answer in {feed.path} within {feed.wait_s:g} s, "
                      "recorded without it")
        if req.answer is not None:
            a = req.answer
            note_answer(self.engine, self.key, a.dev, a.ino, a.line)

    def save(self) -> None:
        """Save where reading the answers resumes from, and forget the notes of the
        answers before it."""
        cursor = self.feed.cursor()
        if cursor is not None:
            save_cursor(self.engine, self.key, cursor)
            forget_answers(self.engine, self.key, cursor)

    def close(self) -> None:
        """Close the answers file."""
        self.feed.close()
