"""The llama.cpp side of `specledger bench llama`: one llama-server per drafter on the
shipped models' GGUF export, the prompts our torch sessions ask, and the server's own
per-request timings summed into runs.

llama-server runs as `ServerOptions` defaults it (f32 KV cache, no flash attention: the
numerics of our f32 engine) but without `-v`: per-token debug logging costs about a
quarter of its decode speed on this CPU, and our recorder's cost is ~1%.
"""

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from adapters.llama.gguf.export import cached_gguf
from adapters.llama.server.client import Completion
from adapters.llama.server.options import SPEC_TYPES, Drafter, ServerOptions
from adapters.llama.server.process import LlamaServer
from engine.config import RunConfig
from engine.hybrid.tokenizer import chat_template, encode
from specbench.common import WARMUP_TOKENS, BenchOptions, group_by

WARMUP_QUESTION = "Say hello."  # unrelated to the prompts: its answer must not seed a pool


@dataclass
class LlamaRun:
    """One pass of one drafter over every prompt: summed timings and the answers."""

    drafter: str
    repeat: int
    generated: int
    decode_ms: float
    drafted: int
    accepted: int
    answers: list[list[int]]

    @classmethod
    def of(cls, drafter: str, repeat: int, done: Sequence[Completion]) -> "LlamaRun":
        """The run of `done`, one completion per prompt."""
        return cls(drafter=drafter, repeat=repeat,
                   generated=sum(c.predicted_n for c in done),
                   decode_ms=sum(c.predicted_ms for c in done),
                   drafted=sum(c.draft_n for c in done),
                   accepted=sum(c.draft_accepted for c in done),
                   answers=[c.tokens for c in done])

    @property
    def tok_s(self) -> float:
        """Generated tokens per decode second (llama-server's `predicted_*` timings)."""
        return 1e3 * self.generated / self.decode_ms if self.decode_ms else 0.0

    @property
    def acceptance(self) -> float:
        """Accepted over drafted tokens."""
        return self.accepted / self.drafted if self.drafted else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping with the derived numbers (answers as their lengths)."""
        return asdict(self) | {"answers": [len(a) for a in self.answers], "tok_s": self.tok_s,
                               "acceptance": self.acceptance}


def session_prompts(config: RunConfig, checkpoint: Any) -> list[list[int]]:
    """The first-turn prompt of each slot of a torch session of `config`: what our engine
    is asked, so llama-server is asked the same."""
    from engine.conversation import HeldOutConversation
    from engine.hybrid.backend import template_for

    template, conversation = template_for(checkpoint.tokenizer), HeldOutConversation(config)
    return [template.next_prompt([], conversation.question(slot, 1))
            for slot in range(config.slots)]


def warmup_prompt() -> list[int]:
    """A short question unrelated to the prompts (its answer must not seed a pool)."""
    return chat_template().next_prompt([], encode(WARMUP_QUESTION))


def llama_name(drafter: str) -> str:
    """llama.cpp's name for one of our drafters."""
    kind = Drafter(drafter)
    return SPEC_TYPES[kind] if kind is not Drafter.NONE else "none"


def run_llama(opts: BenchOptions, base: RunConfig, drafters: Sequence[str],
              prompts: Sequence[Sequence[int]], repeats: int, logs: Path) -> list[LlamaRun]:
    """`repeats` interleaved passes of every drafter over the prompts, with the drafter
    sizes and answer cap of our run configuration `base`. Every pass gets fresh servers:
    llama-server keeps n-gram pools across requests, and a pool that saw the same answers
    in an earlier pass would draft them back (our sessions start empty too)."""
    target = cached_gguf(opts.model, build=opts.llama_build)
    draft_gguf = cached_gguf(opts.draft_model, build=opts.llama_build)
    base = base.replace(llama_build=opts.llama_build)
    warmup = warmup_prompt()
    runs: list[LlamaRun] = []
    for i in range(repeats):
        opts.log(f"llama: llama.cpp round {i + 1}/{repeats}: {len(drafters)} servers, "
                 f"{len(prompts)} prompts of up to {base.answer_cap} tokens")
        with ExitStack() as stack:
            servers = {}
            for d in drafters:  # all up at once (idle ones cost no CPU): interleaved passes
                options = ServerOptions.from_run_config(base.replace(drafter=d), target,
                                                        draft_gguf, threads=opts.threads,
                                                        verbose=False)
                server = stack.enter_context(LlamaServer(options, logs / f"{d}.log"))
                server.client.complete(warmup, WARMUP_TOKENS)  # first-request allocations
                servers[d] = server
            for d, server in servers.items():
                done = [server.client.complete(p, base.answer_cap) for p in prompts]
                runs.append(LlamaRun.of(d, i, done))
    return runs


def llama_summary(runs: Sequence[LlamaRun]) -> list[dict[str, Any]]:
    """Per drafter, in run order: the fastest pass's numbers (load on a shared CPU only
    ever adds time), and whether every pass answered as plain llama.cpp decode did."""
    plain = next(r.answers for r in runs if r.drafter == "none")
    rows = []
    for drafter, passes in group_by(runs, lambda r: r.drafter).items():
        best = max(passes, key=lambda r: r.tok_s)
        rows.append({"drafter": drafter, "llama_name": llama_name(drafter),
                     "tok_s": best.tok_s, "acceptance": best.acceptance,
                     "generated": best.generated, "drafted": best.drafted,
                     "accepted": best.accepted, "tok_s_runs": [r.tok_s for r in passes],
                     "same_as_plain": all(r.answers == plain for r in passes)})
    return rows
