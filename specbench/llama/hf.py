"""transformers' side of `specledger bench llama`: `Qwen3_5ForCausalLM.generate` on the
target's own safetensors (the weights our engine reads and llama.cpp's GGUF is exported
from), float32, greedy, over the same prompts with the same answer cap and thread count.

A prompt's decode seconds are its whole generate less a one-token generate of it (the
prefill and the first token), so its tokens/s counts what ours and llama.cpp's count:
the tokens after the first over the time spent decoding them.
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from engine.shipped import model_dir
from specbench.common import WARMUP_TOKENS, BenchOptions, timed


@dataclass
class HfRun:
    """One pass over every prompt: tokens decoded after each first, their seconds, and
    the answers (every generated token, the first included)."""

    repeat: int
    generated: int
    decode_s: float
    answers: list[list[int]]

    @property
    def tok_s(self) -> float:
        """Decoded tokens per decode second."""
        return self.generated / self.decode_s if self.decode_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping with tokens/s (answers as their lengths)."""
        return asdict(self) | {"answers": [len(a) for a in self.answers], "tok_s": self.tok_s}


def run_transformers(opts: BenchOptions, prompts: Sequence[Sequence[int]], cap: int,
                     eos: Sequence[int], repeats: int) -> list[HfRun]:
    """`repeats` passes of greedy `generate` over `prompts`, answers capped at `cap`
    tokens and ended by any of `eos`, on `opts.threads` threads."""
    import torch
    from transformers import Qwen3_5ForCausalLM

    torch.set_num_threads(opts.threads)
    model = Qwen3_5ForCausalLM.from_pretrained(model_dir(opts.model),
                                               dtype=torch.float32).eval()

    def generate(prompt: Sequence[int], n: int) -> tuple[list[int], float]:
        ids = torch.tensor([list(prompt)])
        out, seconds = timed(model.generate, ids, max_new_tokens=n, do_sample=False,
                             eos_token_id=list(eos), pad_token_id=eos[0])
        return out[0, ids.shape[1]:].tolist(), seconds

    runs = []
    with torch.inference_mode():
        generate(prompts[0], WARMUP_TOKENS)  # first-call allocations land on no pass
        for i in range(repeats):
            opts.log(f"llama: transformers round {i + 1}/{repeats}: {len(prompts)} prompts "
                     f"of up to {cap} tokens")
            generated, seconds, answers = 0, 0.0, []
            for prompt in prompts:
                _, first = generate(prompt, 1)
                answer, whole = generate(prompt, cap)
                generated += len(answer) - 1
                seconds += whole - first
                answers.append(answer)
            runs.append(HfRun(repeat=i, generated=generated, decode_s=seconds,
                              answers=answers))
    return runs
