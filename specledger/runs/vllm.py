"""`specledger run --backend vllm`: the torch backend's conversation (the same held-out
questions, chosen by the same seed, answered under the same sampling) asked of vLLM's
OpenAI server (its CPU build, in its own environment: `make vllm`), running the model's
own directory with the speculative method our drafter maps to (adapters/vllm/options.py),
through the `openai` client, streamed; vLLM's answers and its counters around each
request are recorded as the session (adapters/vllm/ledger.py).

The server answers this one conversation, so the Prometheus counters read around a request
are that request's. It is started per run (about 1-2 minutes here: loading, the KV cache,
warm-up) and stopped before the answers are read.
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapters.protocol import Recording, Sampling, Sink
from adapters.vllm.answers import Answers, parse_answers
from adapters.vllm.conversation import Conversation, converse
from adapters.vllm.errors import MethodUnsupportedError
from adapters.vllm.ledger import EngineFacts, record_answers
from adapters.vllm.options import VllmOptions, speculative_method
from adapters.vllm.paths import require_python
from adapters.vllm.provenance import BACKEND, Provenance, session_config
from adapters.vllm.server import VllmServer
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.files import write_file
from engine.model_digest import checkpoint_digest
from engine.shipped import model_dir
from specledger.errors import UsageError
from specledger.runs.observed import cmd_run_observed, require_openai

MAX_MODEL_LEN = 4096
"""The context vLLM is given (or the model's own limit, if smaller): three turns of
512-token answers pass 2048 tokens."""


def _checkpoint(spec: str, what: str) -> Path:
    """The model directory `spec` names, or ConfigError."""
    path = model_dir(spec)
    if not (path / "config.json").is_file():
        raise ConfigError(f"{what}: {spec} is not a model directory (no config.json in "
                          f"{path}); vLLM runs the model's own directory, not a GGUF file")
    return path


def server_options(config: RunConfig) -> VllmOptions:
    """The server for `config`: the target's directory, the method our drafter maps to
    (a draft model is refused: `CANNOT_RUN`), sizes from the configuration."""
    if config.slots != 1:
        raise ConfigError(f"slots: the vllm backend records one conversation (the counters "
                          f"around a request are that request's), not {config.slots}")
    try:
        method = speculative_method(config.drafter_names)
    except MethodUnsupportedError as exc:  # what the command line asked cannot run
        raise UsageError(str(exc)) from None
    if method is not None and config.draft_min:
        raise UsageError("draft_min: vLLM has no minimum draft length; run the vllm "
                         "backend with --draft-min 0")
    model = _checkpoint(config.model, "model")
    positions = json.loads((model / "config.json").read_text()).get("max_position_embeddings")
    return VllmOptions(model=model, method=method, draft_max=config.draft_max,
                       ngram_n=config.ngram_n,
                       max_model_len=min(MAX_MODEL_LEN, int(positions or MAX_MODEL_LEN)))


@dataclass(frozen=True)
class VllmReport:
    """What the stopped server reported: the answers (and their records), the run's
    provenance, and the error that ended the conversation early."""

    answers: Answers
    records: list[dict[str, object]]
    prov: Provenance
    error: str | None


class VllmEngine:
    """One `run --backend vllm`, as adapters/protocol.py's `ObservedEngine`."""

    backend = BACKEND

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.options = server_options(config)  # a bad option is told before anything starts
        require_openai(BACKEND)
        self.version: str | None = None

    def server(self) -> VllmServer:
        """vLLM's server for the run, not started (vLLM must be installed)."""
        require_python()
        return VllmServer(self.options)

    def drive(self, server: VllmServer, asked: Sequence[str],
              on_answer: Callable[[int], None]) -> Conversation:
        """The conversation, through the `openai` client, streamed."""
        from openai import OpenAI

        self.version = server.client.version()
        c = self.config
        client = OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="specledger",
                        max_retries=0, timeout=600.0)
        sampling = Sampling(c.temperature, c.top_k, c.top_p, c.seed, c.answer_cap)
        done = converse(client, server.client.metrics, asked, sampling,
                        on_answer=lambda r: on_answer(sum(len(x) for x in r["chunks"])))
        if done.error is not None:  # the engine core's death reaches the client as an API error
            done.error = server.died(f"turn {len(done.exchanges) + 1}") or done.error
        return done

    def read(self, server: VllmServer, driven: Conversation) -> VllmReport:
        """The answers, written beside the server's log, and read back as recorded."""
        path = server.log_path.with_suffix(".answers.json")
        text = json.dumps(driven.exchanges, indent=1)
        write_file(path, text)
        prov = Provenance(args=tuple(server.args), log_path=str(server.log_path),
                          answers_path=str(path), version=self.version,
                          model=self.config.model,
                          model_sha256=checkpoint_digest(self.options.model),
                          run=self.config.to_dict())
        return VllmReport(parse_answers(text, str(path)), driven.exchanges, prov,
                          str(driven.error) if driven.error is not None else None)

    def record(self, report: VllmReport, sink: Sink) -> Recording:
        """The answers' turns, fired into `sink`."""
        from engine.hybrid.tokenizer import chat_template

        opts = self.options
        facts = EngineFacts(self.config.drafter if opts.method is not None else None,
                            opts.draft_max, opts.prefix_caching, chat_template().eog_ids)
        result = record_answers(report.answers.answers, report.records, sink, facts,
                                report.error)
        config = session_config(opts, report.prov, report.answers, result, report.error)
        return Recording(config, BACKEND, self.config.seed, report.prov.model_sha256,
                         result.turns, result.violations, result.events, report.error,
                         {"log": Path(report.prov.log_path),
                          "answers": Path(report.prov.answers_path)})


def run_and_print(config: RunConfig, db: str, as_json: bool) -> int:
    """`specledger run --backend vllm`: run, record, print the turns."""
    return cmd_run_observed(VllmEngine(config), config, db, as_json, lambda cfg: (
        f"vLLM {cfg['version']} drafter={config.drafter} (method {cfg['method'] or 'none'})"))
