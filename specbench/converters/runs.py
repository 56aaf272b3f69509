"""The measurements of `specledger bench converters`: each build's GGUF exports of the
shipped models, and the greedy answers of each build's llama-server on each GGUF.

Every server is asked the same prompts as token ids, built by our own ChatML template
from held-out questions (the first turn of a torch session's slots), so a difference in
the answers is a difference in what the model computes, not in how a server tokenized a
text; whether the server's own chat template and tokenizer give the same ids is recorded
beside the answers. A server that will not load a GGUF is a result too: its last error
line is kept.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from adapters.llama.errors import (
    GgufExportError,
    ModelRefusedError,
    ServerDiedError,
    ServerRequestError,
    ServerTimeoutError,
)
from adapters.llama.gguf.export import cached_gguf
from adapters.llama.server.options import ServerOptions
from adapters.llama.server.process import LlamaServer, last_error_line, log_lines
from engine.config import RunConfig
from engine.speculative import common_prefix

MODELS = ("target", "draft")
NO_MTP = "target-no-mtp"
"""The target exported by the default build's converter without its MTP head: the file
builds before draft-mtp load (they read the nextn block as one more layer)."""
COLUMNS = ("target", NO_MTP, "draft")


def base_model(model: str) -> str:
    """The shipped model an export is of (`target-no-mtp` is the target)."""
    return "target" if model == NO_MTP else model


class Outcome(StrEnum):
    """What a server did with one GGUF."""

    ANSWERED = "answered"
    REFUSED = "refused"    # it exited (or never got healthy) while loading
    CRASHED = "crashed"    # it loaded, then died or failed a request


@dataclass(frozen=True)
class Export:
    """One build's export of one shipped model: the file, or why there is none."""

    build: str
    model: str
    path: Path | None
    error: str = ""


@dataclass(frozen=True)
class Cell:
    """The greedy answers of `server`'s llama-server on the GGUF that `gguf_build`'s
    converter wrote of `model`: token ids per prompt (none unless answered), whether the
    server's own template and tokenizer build our prompt ids, and the error line of a
    refusal or crash."""

    server: str
    gguf_build: str
    model: str
    outcome: Outcome
    answers: tuple[tuple[int, ...], ...] = ()
    same_prompt_ids: bool | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping."""
        return asdict(self) | {"outcome": self.outcome.value,
                               "answers": [list(a) for a in self.answers]}


@dataclass(frozen=True)
class Prompt:
    """One held-out question as text, and its one-turn ChatML prompt in our token ids."""

    question: str
    ids: tuple[int, ...]


def held_out_prompts(count: int, seed: int = 0) -> list[Prompt]:
    """The first-turn prompts of `count` held-out conversations, the ones a torch session
    with `count` slots asks first."""
    from engine.conversation import HeldOutConversation
    from engine.hybrid.tokenizer import chat_template

    conversation = HeldOutConversation(RunConfig(turns=1, slots=count, seed=seed))
    template = chat_template()
    asked = [conversation.question(slot, 1) for slot in range(count)]
    return [Prompt(bytes(q).decode("utf-8", errors="replace"),
                   tuple(template.next_prompt([], q))) for q in asked]


def torch_answers(checkpoint: str, prompts: Sequence[Prompt], tokens: int
                  ) -> tuple[tuple[int, ...], ...]:
    """Our torch engine's greedy answers on the checkpoint itself (what every GGUF of it
    should compute), each cut after its first end-of-generation token, as llama-server's."""
    import torch

    from engine.hybrid.loader import load_checkpoint

    ckpt = load_checkpoint(checkpoint)
    answers = []
    for p in prompts:
        state = ckpt.model.new_state()
        logits = ckpt.model(torch.tensor([p.ids]), state, last_only=True)
        out: list[int] = []
        while len(out) < tokens:
            out.append(int(logits[0, -1].argmax()))
            if out[-1] in ckpt.config.eos_token_ids:
                break
            logits = ckpt.model(torch.tensor([[out[-1]]]), state)
        answers.append(tuple(out))
    return tuple(answers)


def export(build: str, model: str, checkpoint: str) -> Export:
    """`checkpoint` exported (once, into the cache) by `build`'s own converter (the MTP
    head left out for NO_MTP)."""
    try:
        return Export(build, model, cached_gguf(checkpoint, build=build, mtp=model != NO_MTP))
    except GgufExportError as exc:
        return Export(build, model, None, str(exc))


def greedy_cell(server_build: str, gguf: Export, prompts: Sequence[Prompt],
                tokens: int, threads: int, log: Path) -> Cell:
    """`server_build`'s llama-server on `gguf` (no drafter), each prompt answered greedily
    to at most `tokens` tokens, from scratch."""
    assert gguf.path is not None
    cell = {"server": server_build, "gguf_build": gguf.build, "model": gguf.model}
    options = ServerOptions(model=gguf.path, threads=threads, verbose=False,
                            build=server_build)
    server = LlamaServer(options, log)
    try:
        server.start()
    except (ModelRefusedError, ServerTimeoutError):
        return Cell(**cell, outcome=Outcome.REFUSED, error=last_error_line(server.log_text()))
    try:
        with server:
            client = server.client
            own = [tuple(client.tokenize([client.apply_template(
                [{"role": "user", "content": p.question}])])[0]) for p in prompts]
            answers = tuple(tuple(client.complete(p.ids, tokens).tokens) for p in prompts)
    except (ServerDiedError, ServerRequestError) as exc:
        last = (log_lines(server.log_text()) or [str(exc)])[-1]
        return Cell(**cell, outcome=Outcome.CRASHED, error=f"{exc}; last log line: {last}")
    return Cell(**cell, outcome=Outcome.ANSWERED, answers=answers,
                same_prompt_ids=own == [p.ids for p in prompts])


def first_difference(reference: Sequence[Sequence[int]], got: Sequence[Sequence[int]]
                     ) -> tuple[int, int] | None:
    """(prompt, token position) where `got`'s answers first part from `reference`'s, or
    None when every answer is the same (an answer that stops early differs where the other
    goes on)."""
    for i, (a, b) in enumerate(zip(reference, got, strict=True)):
        if list(a) != list(b):
            return i, common_prefix(a, b)
    return None
