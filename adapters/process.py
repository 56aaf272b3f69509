"""A server process that specledger owns, and the kept-alive loopback connection its
client talks through: what the llama.cpp and vLLM adapters share. Each adapter adds how
its server is started, when it is ready, and how it says why it failed.

The process runs in a session of its own, so a Ctrl-C reaches us and we stop it in order;
stopping terminates its whole process group (vLLM's engine core is the server's child),
then kills what outlives the grace period. A handle never closed is stopped at
interpreter exit.
"""

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

from engine.errors import BackendError

HOST = "127.0.0.1"  # loopback only: the server is ours, never anyone else's


class Connection:
    """One kept-alive HTTP connection to the server at `HOST`:`port`. `lost` is called when
    a request gets no answer and returns the error to raise (the server handle knows
    whether its process died, and why)."""

    def __init__(self, port: int, lost: Callable[[str], Exception],
                 timeout_s: float = 600.0) -> None:
        self.port = port
        self._lost = lost
        self._timeout = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        """Drop the kept-alive connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request_raw(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """Status and undecoded body of one request (`body` sent as JSON)."""
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        for attempt in (0, 1):  # a kept-alive connection the server closed: reconnect once
            if self._conn is None:
                self._conn = http.client.HTTPConnection(HOST, self.port, timeout=self._timeout)
            try:
                self._conn.request(method, path, body=payload, headers=headers)
                resp = self._conn.getresponse()
                return resp.status, resp.read()
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                if attempt:
                    raise self._lost(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        raise AssertionError("unreachable")

    def healthy(self) -> bool:
        """Whether `/health` answers 200 (the model is loaded, and vLLM's warmed up)."""
        try:
            status, _ = self.request_raw("GET", "/health")
        except BackendError:  # what `lost` made of no answer: no server (yet)
            return False
        return status == 200


def free_port() -> int:
    """A loopback port nobody holds now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Terminate `proc`'s process group, then kill it if the process outlives `grace_s`."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # a child left behind, or the server itself
    if proc.poll() is None:
        proc.wait()


ClientT = TypeVar("ClientT", bound=Connection)


class ServerProcess(ABC, Generic[ClientT]):
    """One server process and its log file; use as a context manager. `log_path` is where
    its output goes (default: a new file in the temp folder, kept after the server stops).
    A subclass names the server (`NAME`, `LOG_PREFIX`), its grace period and its error for
    a server that is gone (`DIED`), and implements `start` and `_lost`."""

    NAME: ClassVar[str]
    LOG_PREFIX: ClassVar[str]
    STOP_GRACE_S: ClassVar[float]
    DIED: ClassVar[type[Exception]]

    def __init__(self, log_path: Path | None = None) -> None:
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix=self.LOG_PREFIX, suffix=".log")
            os.close(fd)
            log_path = Path(name)
        self.log_path = Path(log_path)
        self._proc: subprocess.Popen[bytes] | None = None
        self._client: ClientT | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @abstractmethod
    def start(self) -> None:
        """Start the server and wait until it is ready (or raise, with it stopped)."""

    @abstractmethod
    def _lost(self, what: str) -> Exception:
        """The error for a request (`what`) that got no answer."""

    @property
    def client(self) -> ClientT:
        """The client of the running server."""
        if self._client is None:
            raise self.DIED(f"{self.NAME} is not running: use the handle in a `with` block")
        return self._client

    @property
    def pid(self) -> int:
        """The server's process id."""
        if self._proc is None:
            raise self.DIED(f"{self.NAME} was not started")
        return self._proc.pid

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def log_text(self) -> str:
        """The server's log so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _spawn(self, cmd: Sequence[str], env: dict[str, str]) -> None:
        """Start `cmd` with its output in the log, in a session of its own."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, env=env,
                                          start_new_session=True)
        weakref.finalize(self, stop_group, self._proc, self.STOP_GRACE_S)

    def _exit_status(self, wait_s: float) -> str | None:
        """How the process ended ('exited with status N', 'killed by signal N'), after
        up to `wait_s` for a dying process to finish dying; None while it runs."""
        proc = self._proc
        if proc is None:
            return None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait_s)
        code = proc.returncode
        if code is None:
            return None
        return f"killed by signal {-code}" if code < 0 else f"exited with status {code}"

    def check_alive(self) -> None:
        """Raise the server's died error if the process has exited."""
        if not self.running:
            raise self._lost("process check")

    def stop(self) -> None:
        """Stop the server (its whole process group)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._proc is not None:
            stop_group(self._proc, self.STOP_GRACE_S)
