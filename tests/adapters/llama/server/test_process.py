"""The llama-server handle: loopback only, healthy before use, its log kept and showing
the speculative rounds under -v, stopped on exit and on Ctrl-C, and one-line errors of
specific types when it cannot start or dies mid-run."""

import os
import re
import signal
import socket
from pathlib import Path

import pytest

from adapters.llama.errors import (
    LlamaNotBuiltError,
    ModelRefusedError,
    PortInUseError,
    ServerDiedError,
    ServerTimeoutError,
)
from adapters.llama.server import paths
from adapters.llama.server.options import ServerOptions
from adapters.llama.server.process import LlamaServer
from engine.hybrid.tokenizer import chat_template, encode
from tests.adapters.llama.conftest import Ggufs

PROMPT = chat_template().next_prompt([], encode("def add(a, b):"))


def listening(pid: int) -> list[str]:
    """The local addresses of `pid`'s listening TCP sockets (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A: LISTEN
                out.append(cols[1])
    return out


def test_loopback_only_and_stopped_on_exit(ggufs: Ggufs, tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    with LlamaServer(ServerOptions(model=ggufs.target, verbose=False), log) as server:
        assert server.client.healthy() and server.port > 0
        addresses = listening(server.pid)
        # 0100007F: 127.0.0.1 in /proc/net/tcp's little-endian hex.
        assert addresses == [f"0100007F:{server.port:04X}"], addresses
        assert f"listening on http://127.0.0.1:{server.port}" in server.log_text()
        pid = server.pid
    assert not server.running and not Path(f"/proc/{pid}").exists()  # stopped and reaped
    assert log.read_text()  # the log outlives the server


def test_ctrl_c_stops_the_server(ggufs: Ggufs, tmp_path: Path) -> None:
    server = LlamaServer(ServerOptions(model=ggufs.target, verbose=False), tmp_path / "s.log")
    with pytest.raises(KeyboardInterrupt), server:
        raise KeyboardInterrupt
    with pytest.raises(ServerDiedError, match="not running"):
        _ = server.client
    assert not server.running


def test_verbose_log_shows_speculative_rounds(ggufs: Ggufs, tmp_path: Path) -> None:
    logs = {}
    for verbose in (True, False):
        opts = ServerOptions(model=ggufs.target, drafters=("ngram-simple",), ngram_n=2,
                             verbose=verbose)
        with LlamaServer(opts, tmp_path / f"{verbose}.log") as server:
            answer = server.client.complete(PROMPT, 64)
            logs[verbose] = server.log_text()
        assert answer.draft_n > 0
    drafts = re.findall(r"generate_draft: id=\d+, #tokens=\d+, #draft=(\d+)", logs[True])
    verified = re.findall(r"accepted (\d+)/(\d+) draft tokens", logs[True])
    assert drafts and verified and all(int(k) <= int(n) for k, n in verified)
    assert "generate_draft" not in logs[False] and "draft tokens" not in logs[False]


@pytest.mark.parametrize("drafter", ["ngram-map-k", "ngram-mod", "mtp", "draft-model"])
def test_every_drafter_starts_and_drafts(ggufs: Ggufs, tmp_path: Path, drafter: str) -> None:
    opts = ServerOptions(model=ggufs.target, drafters=(drafter,), draft_model=ggufs.draft,
                         ngram_n=2, verbose=False)
    with LlamaServer(opts, tmp_path / "s.log") as server:
        answer = server.client.complete(PROMPT, 48)
    assert len(answer.tokens) == answer.predicted_n > 0
    assert answer.predicted_per_second > 0
    if drafter != "ngram-map-k":  # map-k needs a repeated key: may not draft in 48 tokens
        assert answer.draft_n > 0


def test_top_candidates_and_metrics(ggufs: Ggufs, tmp_path: Path) -> None:
    opts = ServerOptions(model=ggufs.target, drafters=("mtp",), verbose=False, metrics=True)
    with LlamaServer(opts, tmp_path / "s.log") as server:
        answer = server.client.complete(PROMPT, 32, n_probs=2)
        page = server.client.metrics()
    with LlamaServer(ServerOptions(model=ggufs.target, verbose=False), tmp_path / "p.log") as plain:
        ref = plain.client.complete(PROMPT, 32, n_probs=2)
    assert ref.tokens == answer.tokens and answer.draft_n > 0
    for done in (ref, answer):
        assert len(done.top) == len(done.tokens) == 32
        for i, (token, cands) in enumerate(zip(done.tokens, done.top, strict=True)):
            if cands:  # the tokens of a speculative verify step come without candidates
                assert cands[0][0] == token and (gap := done.gap(i)) is not None and gap >= 0
    assert all(ref.top) and not all(answer.top)
    steps = re.search(r"^llamacpp:spec_decode_num_drafts_total (\S+)$", page, re.M)
    assert steps is not None and 0 < float(steps[1]) <= answer.draft_n


def test_binary_missing(ggufs: Ggufs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(paths.SERVER_ENV, str(tmp_path / "no-llama-server"))
    with pytest.raises(LlamaNotBuiltError, match="run make llama"):
        LlamaServer(ServerOptions(model=ggufs.target)).start()


def test_port_taken(ggufs: Ggufs, tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(PortInUseError, match=f"{port} is taken"):
            LlamaServer(ServerOptions(model=ggufs.target, port=port), tmp_path / "s.log").start()


def test_model_refused(llama_server_binary: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(ModelRefusedError, match="invalid magic") as err:
        LlamaServer(ServerOptions(model=bad), tmp_path / "s.log").start()
    assert "\n" not in str(err.value)


def test_no_health_in_time(ggufs: Ggufs, tmp_path: Path) -> None:
    server = LlamaServer(ServerOptions(model=ggufs.target, startup_timeout_s=1e-3),
                         tmp_path / "s.log")
    with pytest.raises(ServerTimeoutError, match="did not report healthy"):
        server.start()
    assert not server.running


def test_killed_mid_run(ggufs: Ggufs, tmp_path: Path) -> None:
    with LlamaServer(ServerOptions(model=ggufs.target, verbose=False),
                     tmp_path / "s.log") as server:
        assert len(server.client.complete(PROMPT, 8).tokens) == 8
        os.kill(server.pid, signal.SIGKILL)
        with pytest.raises(ServerDiedError, match="killed by signal 9 mid-run") as err:
            server.client.complete(PROMPT, 8)
        assert "\n" not in str(err.value)
        with pytest.raises(ServerDiedError, match="killed by signal 9"):
            server.check_alive()
