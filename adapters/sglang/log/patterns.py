"""SGLang's line formats as tables. Its logger writes `[YYYY-MM-DD hh:mm:ss( RANKS)] ` before
every message (RANKS: `TP0`, `DP1 TP1 EP1`, or none); what stands before that tag on a line
(a docker or kubectl timestamp, a compose column) is an outer prefix, learned per file
(adapters/logs/prefix.py). The messages this reader reads are `KINDS`, matched in one pass
(adapters/logs/dispatch.py); lines without the tag are tracebacks or `NOISE` (progress
bars, Python warnings, the libraries' own prints)."""

import re
from enum import StrEnum

from adapters.logs.dispatch import Dispatch

TAG = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]{2,4}\d+)*\] ")
"""What an SGLang line body starts with (adapters/logs/prefix.py learns what stands before
it)."""
OWN = re.compile(r"^\s*\[(?P<time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)?)"
                 r"(?: (?P<rank>[A-Z]{2,4}\d+(?: [A-Z]{2,4}\d+)*))?\] ?")
"""The logger's own prefix: its time and the rank tags; leading blanks are allowed, since
a thread that indents its paste indents the tag too."""


class Kind(StrEnum):
    """A kind of SGLang message the reader reads."""

    BATCH = "batch"
    HTTP = "http"
    FINISH = "finish"
    RECEIVE = "receive"
    SERVER_ARGS = "server_args"
    CAPACITY = "capacity"
    HYBRID = "hybrid"
    EXCEPTION = "exception"
    STARTED = "started"
    READY = "ready"
    SIGTERM = "sigterm"
    SIGQUIT = "sigquit"
    CHILD_EXIT = "child_exit"
    KILL_TREE = "kill_tree"


KINDS = Dispatch([
    (re.compile(r"(?P<batch>Prefill|Decode) batch[.,]\s*(?P<fields>.*)$"), Kind.BATCH),
    (re.compile(r'INFO:\s+(?P<client>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" '
                r"(?P<status>\d{3})\s*(?P<reason>.*)$"), Kind.HTTP),
    (re.compile(r"Finish: obj=(?P<rest>.*)$"), Kind.FINISH),
    (re.compile(r"Receive: obj=\w*\(.*?\brid='(?P<rid>[^']*)'"), Kind.RECEIVE),
    (re.compile(r"server_args=(?P<args>ServerArgs\(.*)$"), Kind.SERVER_ARGS),
    (re.compile(r"max_total_num_tokens=(?P<tokens>\d+)"), Kind.CAPACITY),
    (re.compile(r"(?P<swa>Hybrid swa model)(?:: .*?architectures=\['(?P<arch>\w+)')?"
                r"|(?P<ssm>Mamba Cache is allocated)"
                r"|Tree cache initialized: .*?hybrid_swa=(?P<tswa>\w+) hybrid_ssm=(?P<tssm>\w+)"),
     Kind.HYBRID),
    (re.compile(r"(?P<who>\w[\w ]*?) hit an exception:\s*(?P<message>.*)$"), Kind.EXCEPTION),
    (re.compile(r"INFO:\s+Started server process \[(?P<pid>\d+)\]"), Kind.STARTED),
    (re.compile(r"The server is fired up and ready to roll"), Kind.READY),
    (re.compile(r"SIGTERM received"), Kind.SIGTERM),
    (re.compile(r"SIGQUIT received|Received sigquit from a child process"), Kind.SIGQUIT),
    (re.compile(r"Subprocess (?P<child>.+?) crashed with exit code (?P<code>-?\d+)"),
     Kind.CHILD_EXIT),
    (re.compile(r"kill_process_tree called"), Kind.KILL_TREE),
])
"""The messages read, each anchored at the body's start (after the logger's prefix)."""

_GLUED = re.compile(r".*(?:it/s|s/it)\](?=\[\d{4}-\d\d-\d\d )")
WARNING = re.compile(r"\.py:\d+: \w*Warning: ")
"""A Python warning's first line (it may follow a progress bar on the same line)."""


def unglue(line: str) -> str:
    """A line as a terminal shows it: what follows its last carriage return (a progress
    bar redraws itself after one), without the bar a logger line was glued to (tqdm ends
    its bar without a newline, so the next message follows on the same line)."""
    line = line.rsplit("\r", 1)[-1]
    m = _GLUED.match(line)
    return line if m is None else line[m.end():]


NOISE = re.compile(
    r"^\s*$"                                       # blank lines as pasted
    r"|.*(?:\d+%\|.*\||it/s\]|s/it\]|\?it/s\])"      # tqdm progress (weights, graphs, clients)
    r"|^\S+\.py:\d+: \w*Warning: "                 # a Python warning's first line
    r"|^\[transformers\] |^Warning: "              # libraries printing on their own
    r"|^'--[\w-]+' is deprecated")                 # SGLang's argument notes, before logging
"""Lines without the logger's prefix that carry nothing to read."""
SHUTDOWN_NOTE = re.compile(r"resource_tracker: There appear to be \d+ leaked")
"""Python's warning as its interpreter shuts down: the processes have exited."""
WARNING_TAIL = re.compile(r"^\s+\S")
"""The indented lines after a Python warning (its source line, an example)."""
TRACEBACK = re.compile(r"^Traceback \(most recent call last\):")
EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt)\b:?.*$")
"""A traceback's last line: the exception and its message, unindented."""
FINISH_FIELDS = {
    "rid": re.compile(r"'id': '(?P<v>[^']*)'|\brid='(?P<v2>[^']*)'"),
    "prompt_tokens": re.compile(r"'prompt_tokens': (?P<v>\d+)"),
    "completion_tokens": re.compile(r"'completion_tokens': (?P<v>\d+)"),
    "cached_tokens": re.compile(r"'cached_tokens': (?P<v>\d+)"),
    "spec_verify_ct": re.compile(r"'spec_verify_ct': (?P<v>\d+)"),
    "finish_reason": re.compile(r"'finish_reason': \{'type': '(?P<v>\w+)'"),
    "e2e_latency": re.compile(r"'e2e_latency': (?P<v>[\d.]+)"),
}
"""What a finished-request line's `meta_info` holds, field by field."""
