"""The passes of `specledger bench engines`, one engine each, in one shape (`EngineRun`):
what a pass generated in how many decode seconds, what it drafted and accepted in how many
verify steps, and its answers.

- ours: recorded sessions of the torch backend (one slot per prompt, one turn), read back
  from the log (`specbench.drafters.runs`): its turns' decode seconds and verify rounds.
- llama.cpp: a fresh llama-server per pass (its n-gram pools outlive a request): its
  responses' `timings` (predicted tokens over predicted ms, drafts) and its Prometheus
  page (0.3.36 counts verify steps: `llamacpp:spec_decode_num_drafts_total`).
- vLLM: one server per method (a start costs a minute or more), warmed up, then every pass
  on it (vLLM keeps no drafting state across requests); a pass is the difference of its
  Prometheus counters: generated tokens, decode seconds (first token to last), drafted
  and accepted tokens, verify steps with drafts. A method vLLM refuses, or whose server
  dies mid-pass (vLLM 0.32's ngram on a CPU without AMX: adapters/answers.vllm_run), is
  kept with the error.

tok/s is generated tokens over decode seconds everywhere: prefill is excluded, and each
answer's first token (produced by the prefill) is counted, as llama.cpp's `timings` and
vLLM's counters both do. Answers keep the top-2 gaps llama-server (`n_probs`, plain steps
only) and vLLM (`top_logprobs`) report, so that a method's answers can be judged against
plain decoding up to near-ties (adapters/differential.py); ours come as one answer per
pass, without gaps (its float32 verify and decode agree token for token).
"""

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from adapters.differential import Answer
from engine.config import RunConfig
from specbench.common import WARMUP_TOKENS, BenchOptions

OURS, LLAMA, VLLM = "ours", "llama.cpp", "vllm"
PLAIN = "none"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
LLAMA_STEPS = "llamacpp:spec_decode_num_drafts_total"
VLLM_COUNTERS = {"generated": "vllm:generation_tokens_total",
                 "decode_s": "vllm:request_decode_time_seconds_sum",
                 "drafted": "vllm:spec_decode_num_draft_tokens_total",
                 "accepted": "vllm:spec_decode_num_accepted_tokens_total",
                 "steps": "vllm:spec_decode_num_drafts_total"}


@dataclass
class EngineRun:
    """One pass of one engine and method (our drafter name; `engine_method` the engine's
    own) over every prompt. `steps` are the verify steps that checked drafts (None where
    unknown); `answers` its answers, prompt after prompt (ours: the pass's tokens as one);
    `session` the recorded session (ours only)."""

    engine: str
    method: str
    engine_method: str
    dtype: str
    repeat: int
    generated: int
    decode_s: float
    drafted: int
    accepted: int
    steps: int | None
    answers: list[Answer]
    session: int | None = None

    @property
    def tok_s(self) -> float:
        """Generated tokens per decode second."""
        return self.generated / self.decode_s if self.decode_s else 0.0

    @property
    def acceptance(self) -> float:
        """Accepted over drafted tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def mean_length(self) -> float | None:
        """Tokens per verify step, the bonus token included: 1 + accepted / steps (what
        llama.cpp and vLLM both call the mean acceptance length)."""
        return 1.0 + self.accepted / self.steps if self.steps else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping with the derived numbers (the answers as their lengths)."""
        return asdict(self) | {"answers": [len(a.tokens) for a in self.answers],
                               "tok_s": self.tok_s,
                               "acceptance": self.acceptance, "mean_length": self.mean_length}


def prometheus_total(text: str, name: str) -> float | None:
    """The sum of metric `name`'s samples over its label sets on a Prometheus text page
    (None when the page has none)."""
    values = [float(m.group(3)) for line in text.splitlines()
              if (m := _SAMPLE.match(line.strip())) and m.group(1) == name]
    return sum(values) if values else None


def run_ours(opts: BenchOptions, base: RunConfig, methods: Sequence[str], repeats: int,
             ckpt: Any) -> list[EngineRun]:
    """`repeats` interleaved passes of each drafter on our engine, recorded into the
    benchmark's log, after an unrecorded warm-up of each."""
    from eventlog import open_db
    from specbench.drafters.runs import recorded_passes

    passes = recorded_passes(opts, [base.replace(drafter=m) for m in methods], repeats,
                             open_db(opts.db, create=True), ckpt,
                             lambda i: f"engines: ours ({base.dtype.value}), pass "
                                       f"{i + 1}/{repeats}")
    return [EngineRun(OURS, r.drafter, r.drafter, base.dtype.value, r.repeat, r.generated,
                      r.decode_s, r.drafted, r.accepted,
                      r.draft_rounds if r.drafter != PLAIN else None,
                      [Answer(tuple(r.answer), (None,) * len(r.answer))], r.session)
            for r in passes]


def run_llama(opts: BenchOptions, base: RunConfig, methods: Sequence[str],
              prompts: Sequence[Sequence[int]], repeats: int, logs: Path) -> list[EngineRun]:
    """`repeats` passes of each drafter on llama-server (f32 GGUF export of the target and
    draft model), fresh servers each pass."""
    from adapters.answers import TOP, llama_answer
    from adapters.llama.gguf.export import cached_gguf
    from adapters.llama.server.options import ServerOptions
    from adapters.llama.server.process import LlamaServer
    from specbench.llama.runs import llama_name, warmup_prompt

    target = cached_gguf(base.model, build=opts.llama_build)
    draft = cached_gguf(base.draft_model, build=opts.llama_build)
    warmup = warmup_prompt()
    runs = []
    for i in range(repeats):
        opts.log(f"engines: llama.cpp, pass {i + 1}/{repeats}")
        for m in methods:
            options = ServerOptions.from_run_config(
                base.replace(drafter=m, llama_build=opts.llama_build), target, draft,
                threads=opts.threads, verbose=False)
            options = replace(options, metrics=True)
            with LlamaServer(options, logs / f"llama-{m}.log") as server:
                server.client.complete(warmup, WARMUP_TOKENS)  # first-request allocations
                before = prometheus_total(server.client.metrics(), LLAMA_STEPS)
                done = [server.client.complete(p, base.answer_cap, n_probs=TOP)
                        for p in prompts]
                after = prometheus_total(server.client.metrics(), LLAMA_STEPS)
            steps = None if before is None or after is None or m == PLAIN else int(after - before)
            runs.append(EngineRun(
                LLAMA, m, llama_name(m), "float32", i, sum(c.predicted_n for c in done),
                sum(c.predicted_ms for c in done) / 1e3, sum(c.draft_n for c in done),
                sum(c.draft_accepted for c in done), steps, [llama_answer(c) for c in done]))
    return runs


def run_vllm(opts: BenchOptions, base: RunConfig, methods: Sequence[str],
             prompts: Sequence[Sequence[int]], repeats: int, logs: Path
             ) -> tuple[list[EngineRun], dict[str, str]]:
    """`repeats` passes of each method on one vLLM server per method (bfloat16, the only
    dtype its CPU build runs); the methods it refuses or dies running, with the error."""
    from adapters.answers import TOP, vllm_answer
    from adapters.vllm.errors import MethodUnsupportedError, ModelRefusedError, ServerDiedError
    from adapters.vllm.options import VllmOptions, speculative_method
    from adapters.vllm.server import VllmServer
    from engine.shipped import model_dir
    from specbench.llama.runs import warmup_prompt

    warmup = warmup_prompt()
    runs: list[EngineRun] = []
    failed: dict[str, str] = {}
    for m in methods:
        try:
            method = speculative_method([m])
            options = VllmOptions(model=model_dir(base.model), method=method,
                                  draft_max=base.draft_max, ngram_n=base.ngram_n,
                                  draft_model=model_dir(base.draft_model))
            opts.log(f"engines: vLLM {m}: starting its server")
            with VllmServer(options, logs / f"vllm-{m}.log") as server:
                server.client.complete(warmup, WARMUP_TOKENS, top=0)
                for i in range(repeats):
                    before = _vllm_counters(server.client.metrics())
                    done = [server.client.complete(p, base.answer_cap, top=TOP)
                            for p in prompts]
                    spent = {k: v - before[k]
                             for k, v in _vllm_counters(server.client.metrics()).items()}
                    runs.append(EngineRun(
                        VLLM, m, method.value if method else PLAIN, "bfloat16", i,
                        int(spent["generated"]), spent["decode_s"], int(spent["drafted"]),
                        int(spent["accepted"]), int(spent["steps"]) if method else None,
                        [vllm_answer(c) for c in done]))
        except (MethodUnsupportedError, ModelRefusedError) as exc:
            failed[m] = f"refused: {exc}"
            opts.log(f"engines: vLLM {m} refused: {exc}")
        except ServerDiedError as exc:
            # The server's own last error says why; the rest is how we noticed.
            failed[m] = f"died mid-pass: {str(exc).rpartition('last error: ')[2]}"
            opts.log(f"engines: vLLM {m} died: {exc}")
    return runs, failed


def _vllm_counters(page: str) -> dict[str, float]:
    """VLLM_COUNTERS' totals on one scrape (0 for the speculative ones a plain server does
    not export)."""
    return {k: prometheus_total(page, name) or 0.0 for k, name in VLLM_COUNTERS.items()}
