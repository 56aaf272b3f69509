"""Each engine's greedy answers as the differential test compares them
(`adapters.differential.Answer`: tokens and the top-1 minus top-2 gap at each): ours from
the torch model's logits, llama-server's from `n_probs`, vLLM's from `top_logprobs`, and
the prompts all three are asked.

The prompts are the held-out stdlib questions a torch session asks in its first turn
(`specledger run --backend torch --seed S`), one per seed, in ChatML, duplicates skipped.
Nothing here imports torch at import time.
"""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.differential import Answer
from adapters.llama.server.client import Completion as LlamaCompletion
from adapters.llama.server.client import LlamaClient
from adapters.vllm.client import Completion as VllmCompletion
from adapters.vllm.client import VllmClient
from adapters.vllm.errors import ServerDiedError
from adapters.vllm.metrics import parse_counters
from adapters.vllm.options import VllmOptions
from adapters.vllm.server import VllmServer

ANSWER_CAP = 128
TOP = 2  # candidates asked per position: the gap needs the best two


def held_out_prompts(checkpoint: Any, n: int) -> list[list[int]]:
    """`n` distinct first-turn prompts of torch sessions, seeds 0, 1, ... (two seeds can
    pick the same function): the session's question for slot 0, turn 1, in the model's
    chat template."""
    from engine.config import RunConfig
    from engine.conversation import HeldOutConversation
    from engine.hybrid.backend import template_for

    template = template_for(checkpoint.tokenizer)
    prompts: dict[tuple[int, ...], None] = {}  # insertion-ordered set
    seed = 0
    while len(prompts) < n:
        question = HeldOutConversation(RunConfig(backend="torch", seed=seed, turns=1))
        prompts[tuple(template.next_prompt([], question.question(0, 1)))] = None
        seed += 1
    return [list(p) for p in prompts]


def our_answer(model: Any, prompt: Sequence[int], cap: int = ANSWER_CAP) -> Answer:
    """Our greedy answer to `prompt` (one prefill, then a token per forward, as plain
    decode does) in the model's own dtype, ending after an end-of-generation token or `cap`
    tokens; the gaps are of its logits, taken in float64."""
    import torch

    from engine.hybrid.tokenizer import END_OF_TEXT, IM_END

    tokens: list[int] = []
    gaps: list[float | None] = []
    device = model.embed_tokens.weight.device
    with torch.inference_mode():
        state = model.new_state()
        logits = model(torch.tensor([list(prompt)], device=device), state, last_only=True)[0, -1]
        while len(tokens) < cap:
            top = torch.topk(logits.double(), TOP)
            tokens.append(int(top.indices[0]))
            gaps.append(float(top.values[0] - top.values[1]))
            if tokens[-1] in (IM_END, END_OF_TEXT):
                break
            logits = model(torch.tensor([[tokens[-1]]], device=device), state,
                           last_only=True)[0, -1]
    return Answer(tuple(tokens), tuple(gaps))


def llama_answer(done: LlamaCompletion) -> Answer:
    """A llama-server completion asked with `n_probs` (its timings' draft counts kept).
    llama-server (0.3.36) gives no candidates for the tokens of a speculative verify step:
    their gaps are None, and a divergence there is judged by the plain run's gap."""
    return Answer(tuple(done.tokens), tuple(done.gap(i) for i in range(len(done.tokens))),
                  done.draft_n, done.draft_accepted)


def llama_answers(client: LlamaClient, prompts: Sequence[Sequence[int]],
                  cap: int = ANSWER_CAP) -> tuple[Answer, ...]:
    """llama-server's greedy answers to `prompts`, one after another, with their gaps."""
    return tuple(llama_answer(client.complete(p, cap, n_probs=TOP)) for p in prompts)


def vllm_answer(done: VllmCompletion, drafted: int = 0, accepted: int = 0) -> Answer:
    """A vLLM completion asked with top logprobs, with the drafts behind it."""
    return Answer(tuple(done.tokens), tuple(done.gap(i) for i in range(len(done.tokens))),
                  drafted, accepted)


def vllm_answers(client: VllmClient, prompts: Sequence[Sequence[int]],
                 cap: int = ANSWER_CAP) -> tuple[Answer, ...]:
    """vLLM's greedy answers to `prompts`, one after another, each with its drafted and
    accepted tokens: the difference of vLLM's Prometheus counters around the request (the
    server answers nothing else meanwhile); 0 for plain decoding, which exports none."""
    out = []
    before = parse_counters(client.metrics())
    for p in prompts:
        done = client.complete(p, cap, TOP)
        after = parse_counters(client.metrics())
        spent = after - before
        out.append(vllm_answer(done, spent.draft_tokens or 0, spent.accepted or 0))
        before = after
    return tuple(out)


def vllm_run(options: VllmOptions, prompts: Sequence[Sequence[int]], logs: Path,
             cap: int = ANSWER_CAP, deaths: int = 0) -> tuple[Answer, ...]:
    """vLLM's answers to `prompts` from a server of `options` (its logs `<logs>/<n>.log`).
    A prompt that kills the server gets an answer carrying the error, and a new server
    answers the next one, until the server has died more than `deaths` times: the prompts
    after that get an answer saying they were not asked (deaths 0: the first death raises).

    Why a server dies: vLLM 0.32's CPU Gated DeltaNet spec-decode path without its native
    conv kernel (no AMX, not ARM: `gdn_attention._spec_forward`) rolls each sequence's conv
    buffer as if every step verified a full draft of `num_speculative_tokens`. ngram drafts
    vary in length: after a shorter one, the next step reads the wrong conv window (the
    answer is corrupted), and when more tokens were accepted than the new step holds, the
    buffer copy fails ("The size of tensor a (7) must match the size of tensor b (6)") and
    the server dies. MTP always drafts in full and is unaffected."""
    out: list[Answer] = []
    died = 0
    while len(out) < len(prompts):
        with VllmServer(options, logs / f"{died}.log") as server:
            while len(out) < len(prompts):
                try:
                    out += vllm_answers(server.client, [prompts[len(out)]], cap)
                except ServerDiedError as exc:
                    if deaths == 0:
                        raise
                    out.append(Answer((), (), error=str(exc)))
                    if died >= deaths:
                        skipped = f"not asked: the server had died {died + 1} times"
                        out += [Answer((), (), error=skipped)] * (len(prompts) - len(out))
                    died += 1
                    break
    return tuple(out)
