"""A llama-server that specledger owns: started on the loopback with flags from
`ServerOptions`, ready once `/health` answers, its stdout and stderr kept in a log file,
stopped (terminate, then kill) when the `with` block ends, on Ctrl-C, or at interpreter
exit if the handle was never closed.

With `port` 0 the server binds a free port itself (`--port 0`) and the handle reads which
from the log's `listening on` line (written once the model is loaded), so no other
process can take the port between a probe and the bind; a chosen port is probed first.
The child gets no `LLAMA_ARG_*` variables from our environment: the command line is its
whole configuration. Failures become one-line errors: the binary missing, the port
taken, the model or a flag refused (the log's last error line), no health in time, the
process gone mid-run.
"""

import functools
import os
import re
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from adapters.llama.builds.matrix import Dialect
from adapters.llama.errors import (
    ModelRefusedError,
    PortInUseError,
    ServerDiedError,
    ServerTimeoutError,
)
from adapters.llama.server.client import LlamaClient
from adapters.llama.server.options import HOST, ServerOptions, server_args
from adapters.llama.server.paths import require_server
from adapters.process import ServerProcess

_LISTENING = re.compile(rf"listening on http://{re.escape(HOST)}:(\d+)")
_BIND_FAILED = "couldn't bind HTTP server socket"
# Lines that only say that loading failed, after the line that says why.
_GENERIC = ("exiting due to", "failed to load model", "cleaning up before exit")
_PREFIX = re.compile(r"^\d+(\.\d+)+ [A-Z] ")  # "0.00.011.157 E "
_POLL_S = 0.05
_SPEC_DRAFT_FLAG = "--spec-draft-n-max"


@functools.cache
def _dialect(binary: str, mtime_ns: int) -> Dialect:
    done = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    return Dialect.SPEC_DRAFT if _SPEC_DRAFT_FLAG in done.stdout + done.stderr \
        else Dialect.LEGACY


def binary_dialect(binary: Path) -> Dialect:
    """The flag dialect of the llama-server at `binary`, from its `--help` (asked once per
    binary file): a binary given by path may be any build, not only one of the matrix."""
    return _dialect(str(binary), binary.stat().st_mtime_ns)


def log_lines(log: str) -> list[str]:
    """The non-empty lines of a llama-server log, without their time and level prefix."""
    return [_PREFIX.sub("", ln).strip() for ln in log.splitlines() if ln.strip()]


def last_error_line(log: str) -> str:
    """The line of a llama-server log that best says why it stopped: the last line
    mentioning an error that is not one of the generic 'exiting' lines, else the last
    non-empty line."""
    lines = log_lines(log)
    errors = [ln for ln in lines if re.search(r"error|failed|invalid|unknown|cannot", ln,
                                              re.IGNORECASE)]
    specific = [ln for ln in errors if not any(g in ln for g in _GENERIC)]
    return next((pick[-1] for pick in (specific, errors, lines) if pick), "(empty log)")


def check_port_free(port: int) -> None:
    """Raise PortInUseError unless `port` can be bound on the loopback. llama-server binds
    with SO_REUSEPORT, so a second llama-server on a taken port would bind too and share
    its requests; this probe, binding without it, fails on any holder."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise PortInUseError(f"port {HOST}:{port} is taken ({exc.strerror}): pass "
                                 f"another, or 0 for a free one") from None


class LlamaServer(ServerProcess[LlamaClient]):
    """One llama-server process; use as a context manager. `log_path` is where its log
    goes (default: a new file in the temp folder, kept after the server stops)."""

    NAME = "llama-server"
    LOG_PREFIX = "llama-server-"
    STOP_GRACE_S = 5.0
    DIED = ServerDiedError

    def __init__(self, options: ServerOptions, log_path: Path | None = None,
                 extra: Sequence[str] = ()) -> None:
        super().__init__(log_path)
        self.options = options
        # Flags `ServerOptions` does not model, after its own (llama.cpp's parser keeps a
        # flag's last value).
        self.extra = list(extra)
        self.port = 0
        self.dialect = Dialect.SPEC_DRAFT
        """The flag dialect of the binary that runs (known once started)."""

    def start(self) -> None:
        """Start the server and wait until it is healthy (or raise, with it stopped)."""
        binary = require_server(self.options.build, self.options.cuda)
        if self.options.port:
            check_port_free(self.options.port)
        self.dialect = binary_dialect(binary)
        args = [str(binary), *server_args(self.options, self.options.port, self.dialect),
                *self.extra]
        self._spawn(args, {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")})
        try:
            self._wait_ready()
        except BaseException:  # Ctrl-C while loading too
            self.stop()
            raise

    def _wait_ready(self) -> None:
        """Poll the log and `/health` until the server is ready."""
        deadline = time.monotonic() + self.options.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise self._exit_error()
            if not self.port:  # logged once the model is loaded
                match = _LISTENING.search(self.log_text())
                self.port = int(match.group(1)) if match else 0
            if self.port:
                if self._client is None:
                    self._client = LlamaClient(self.port, self._lost)
                if self._client.healthy():
                    return
            time.sleep(_POLL_S)
        raise ServerTimeoutError(
            f"llama-server did not report healthy within {self.options.startup_timeout_s:g} s "
            f"(log {self.log_path}: {last_error_line(self.log_text())})")

    def _exit_error(self) -> Exception:
        """The error for a server that exited while starting."""
        log = self.log_text()
        status = self._proc.returncode if self._proc is not None else None
        if _BIND_FAILED in log:
            return PortInUseError(f"llama-server could not bind {HOST}:{self.options.port}: "
                                  f"the port is taken; pass another or 0 for a free one")
        return ModelRefusedError(f"llama-server exited with status {status} while loading "
                                 f"{self.options.model.name}: {last_error_line(log)} "
                                 f"(log {self.log_path})")

    def _lost(self, what: str) -> Exception:
        """The error for a request that got no answer."""
        how = self._exit_status(wait_s=1.0)
        if how is not None:
            last = (log_lines(self.log_text()) or ["(empty log)"])[-1]
            return ServerDiedError(f"llama-server (pid {self.pid}) {how} mid-run ({what}); "
                                   f"last log line: {last}")
        return ServerDiedError(f"llama-server stopped answering ({what}); log {self.log_path}")
