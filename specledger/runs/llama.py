"""`specledger run --backend llama`: the torch backend's conversations (the same held-out
questions, chosen by the same seed, answered under the same sampling) asked of llama.cpp's
llama-server, running the shipped models' GGUF export with the drafter our name maps to
(adapters/llama/server/options.py), through the OpenAI-compatible API with the `openai` client;
then the server's -v log and the answers are recorded as the session, by the same ledger
that `specledger import llama-server` uses; `LlamaEngine` is the run as an observed engine
(adapters/protocol.py), recorded by specledger/runs/observed.py.

llama-server runs one slot here (adapters/llama/server/process.py starts it with `-np 1`), so a run
is one conversation. The server is stopped before its log is read: it writes a task's
release after the answer is sent.
"""

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.llama.ledger.provenance import BACKEND, Provenance, file_sha256
from adapters.llama.ledger.record import LedgerResult
from adapters.llama.ledger.responses import Responses, parse_responses
from adapters.llama.log.reader import LogReading
from adapters.llama.log.sources import read_log
from adapters.llama.server.conversation import Exchange, converse
from adapters.llama.server.options import (
    ChainOrderError,
    Drafter,
    ServerOptions,
    parse_drafters,
    server_args,
)
from adapters.llama.server.paths import require_server
from adapters.llama.server.process import LlamaServer
from adapters.protocol import Messages, Recording, Sampling, Sink
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.files import write_file
from engine.progress import Progress
from specledger.errors import UsageError
from specledger.runs.llama_session import LlamaSession, record_llama
from specledger.runs.observed import cmd_run_observed, observe, questions, require_openai


@dataclass(frozen=True)
class LlamaRun:
    """A recorded llama.cpp session and the files it came from."""

    session: LlamaSession
    log_path: Path
    responses_path: Path


def server_version(build: str, cuda: bool = False) -> str:
    """`llama-server --version`'s output, one line."""
    done = subprocess.run([str(require_server(build, cuda)), "--version"], capture_output=True,
                          text=True, timeout=30, check=False)
    return " ".join((done.stdout + done.stderr).split())


def server_options(config: RunConfig) -> ServerOptions:
    """The server for `config`: the target's GGUF (and the draft model's, when its
    drafter runs: a GGUF file as given, a checkpoint exported once), sizes from the
    configuration, -v so the log shows every round."""
    from adapters.llama.gguf.export import model_gguf

    if config.slots != 1:
        raise ConfigError(f"slots: the llama backend runs one conversation (llama-server "
                          f"is started with -np 1), not {config.slots}")
    try:
        drafters = parse_drafters(config.drafter)
    except ChainOrderError as exc:  # what the command line asked cannot run: a usage error
        raise UsageError(str(exc)) from None
    build = config.llama_build
    draft = (model_gguf(config.draft_model, "draft_model", build)
             if Drafter.DRAFT_MODEL in drafters else None)
    return ServerOptions.from_run_config(config, model_gguf(config.model, build=build), draft,
                                         threads=config.threads, verbose=True)


@dataclass(frozen=True)
class LlamaDriven:
    """A driven conversation: its exchanges and the server's flags."""

    exchanges: list[Exchange]
    flags: tuple[str, ...]


@dataclass(frozen=True)
class LlamaReport:
    """What the stopped server reported: its log, the answers (and their file), the
    prompts as it tokenized them, the run's provenance."""

    reading: LogReading
    responses: Responses
    prompts: list[list[int] | None]
    prov: Provenance


class LlamaEngine:
    """One `run --backend llama`, as adapters/protocol.py's `ObservedEngine`."""

    backend = BACKEND

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.options = server_options(config)  # a bad model path is told before the client
        require_openai(BACKEND)
        self.ledger: LedgerResult | None = None
        """The ledger's result, once recorded."""

    def server(self) -> LlamaServer:
        """llama-server for the run, not started."""
        return LlamaServer(self.options)

    def drive(self, server: LlamaServer, asked: Sequence[str],
              on_answer: Callable[[int], None]) -> LlamaDriven:
        """The conversation, through the `openai` client."""
        from openai import OpenAI

        c = self.config
        sampling = Sampling(c.temperature, c.top_k, c.top_p, c.seed, c.answer_cap)
        client = OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="specledger",
                        max_retries=0)

        def prompt_ids(messages: Messages) -> list[int]:
            text = server.client.apply_template(messages)
            return server.client.tokenize([text])[0]

        def answered(exchange: Exchange) -> None:
            on_answer(int(exchange.response.get("usage", {}).get("completion_tokens", 0)))

        exchanges = converse(client, asked, sampling, stream=c.stream,
                             prompt_ids=prompt_ids, on_answer=answered)
        return LlamaDriven(exchanges, tuple(server_args(self.options, server.port,
                                                        server.dialect)))

    def read(self, server: LlamaServer, driven: LlamaDriven) -> LlamaReport:
        """The server's log and the answers, written beside it."""
        opts = self.options
        log_path = server.log_path
        responses_path = log_path.with_suffix(".responses.json")
        answers: list[dict[str, Any]] = [e.response for e in driven.exchanges]
        write_file(responses_path, json.dumps(answers, indent=1))
        prov = Provenance(log_path=str(log_path), responses_path=str(responses_path),
                          flags=driven.flags, version=server_version(opts.build, opts.cuda),
                          model_sha256=file_sha256(opts.model),
                          draft_model_sha256=file_sha256(opts.draft_model)
                          if opts.draft_model is not None and Drafter.DRAFT_MODEL in
                          opts.drafters else None, prompt_ids=True, run=self.config.to_dict())
        return LlamaReport(read_log(log_path), parse_responses(json.dumps(answers)),
                           [e.prompt_ids for e in driven.exchanges], prov)

    def record(self, report: LlamaReport, sink: Sink) -> Recording:
        """The log's tasks, fired into `sink`."""
        self.ledger, rec = record_llama(report.reading, report.prov, sink,
                                        responses=report.responses, prompts=report.prompts)
        rec.files = {"log": Path(report.prov.log_path or ""),
                     "responses": Path(report.prov.responses_path or "")}
        return rec


def run_llama(config: RunConfig, db: str, progress: Progress | None = None,
              parent_id: int | None = None) -> LlamaRun:
    """Run `config`'s conversation on llama-server and record it into the log at `db`
    (as a re-run of session `parent_id` when one is given)."""
    engine = LlamaEngine(config)
    done = observe(engine, questions(config), db, progress, parent_id)
    assert engine.ledger is not None
    rec = done.recording
    return LlamaRun(LlamaSession(done.session_id, engine.ledger, rec.config), rec.files["log"],
                    rec.files["responses"])


def run_and_print(config: RunConfig, db: str, as_json: bool) -> int:
    """`specledger run --backend llama`: run, record, print the turns."""
    return cmd_run_observed(LlamaEngine(config), config, db, as_json, lambda cfg: (
        f"llama.cpp {cfg['build']} drafter={config.drafter} "
        f"(--spec-type {','.join(cfg['spec_types'])})"))
