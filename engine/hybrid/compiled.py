"""One-token steps under `torch.compile` (`run --compile`): a model's decode step (the
target's in a draftless round, the draft model's per draft) and the MTP head's chained
step. A decode step of a small model is some 900 ATen calls whose dispatch costs more
than their arithmetic on a CPU, and inductor fuses them into a few loops (shipped target,
1 thread, a busy machine: the step 5x faster, a session's plain decode 1.9x, the same
tokens). The first step of each model in a process compiles (tens of seconds; inductor
caches the code on disk for the next process); positions and KV capacity are symbolic,
so it compiles once.

Fused loops round differently from eager ATen: a compiled session's state and logits
differ from an eager one's in the last bits (a token only at a near-tie). The choice is
part of the session's configuration, so re-execution compiles too."""

import functools
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from engine.hybrid.layers import rotary_tables
from engine.hybrid.model import HybridModel
from engine.hybrid.mtp import MtpHead
from engine.hybrid.state import HybridState


def _step(model: HybridModel, ids: Tensor, conv: list[Tensor], recurrent: list[Tensor],
          keys: list[Tensor], values: list[Tensor], start: int, cos: Tensor, sin: Tensor
          ) -> tuple[Tensor, Tensor]:
    hidden = model._stack(model.embed_tokens(ids), conv, recurrent, keys, values, start,
                          (cos, sin), write=True)
    # The norm's own forward: its hooks are the eager path's; the caller files the hidden
    # state this returns.
    hidden = model.norm.forward(hidden)
    return F.linear(hidden, model.output_weight), hidden


@functools.cache
def _compiled(fn: Callable[..., tuple[Tensor, Tensor]]) -> Callable[..., tuple[Tensor, Tensor]]:
    """`fn` compiled, at its first use: torch.compile imports dynamo (about 2 s), which
    eager runs do not pay. The model is an argument, not a closure: one compiled
    function, specialised per model on its first step, that keeps no model alive."""
    # The C++ wrapper calls the fused kernels without Python's per-call work (a few
    # hundred tensor reinterpretations and size asserts a step, which Dynamo's guards
    # already cover): the shipped target's step 1.00 -> 0.75-0.78 ms, same kernels.
    return torch.compile(fn, dynamic=True, options={"cpp_wrapper": True,
                                                    "size_asserts": False})


@torch.inference_mode()
def decode_step(model: HybridModel, token: Tensor, state: HybridState) -> tuple[Tensor, Tensor]:
    """`model.forward(token, state)` for one token (1, 1), compiled: the logits (1, 1, V)
    and the final norm's output (1, 1, hidden); the state advances by one."""
    c = model.config
    start = state.claim(1)
    cos, sin = rotary_tables(start, 1, c.rotary_dim, c.rope_theta, model.dtype, token.device)
    out = _compiled(_step)(model, token, state.conv, state.recurrent, state.keys,
                           state.values, start, cos, sin)
    state.advance(1)
    return out


@torch.inference_mode()
def mtp_step(head: MtpHead, hidden: Tensor, token: Tensor, state: HybridState
             ) -> tuple[Tensor, Tensor]:
    """`head.step(hidden, token, state)` for one pair (hidden (1, 1, H), token (1, 1)),
    compiled: the logits (1, 1, V) and the head's normed output; the cache advances by
    one."""
    start = state.claim(1)
    out = _compiled(MtpHead._run)(head, hidden, token, state.keys[0], state.values[0],
                                  start, head.rope(start, 1, hidden))
    state.advance(1)
    return out
