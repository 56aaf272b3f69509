"""Installed into vLLM's environment (not imported by specledger): works around a vLLM
0.32 bug that stops its CPU build from prefilling any Qwen3.5 model on a CPU with
AVX512-BF16 (Intel Sapphire Rapids and later, AMD Zen 4 and later).

There vLLM runs the Gated DeltaNet's causal convolution in C++ (`causal_conv1d_fwd_cpu`),
which requires its input to be the transpose of a contiguous (tokens, channels) tensor.
Qwen3.5's CPU forward passes a column slice instead (`mixed_qkvz.split(...)[0]`: the
q, k, v channels of the fused q/k/v/z projection, rows longer than the slice), and the op
refuses it: "causal_conv1d_fwd_cpu: expect x to be transposed", killing the engine core
at the first prompt. Qwen3-Next is spared (its layout is rebuilt with `torch.cat`), and so
are CPUs without AVX512-BF16 (a torch fallback runs). docs/vllm.md has the reproduction.

The workaround copies such an input into the layout the op expects, just before the call,
which is what the model code would do with a `.contiguous()`: the same values, so nothing
the model computes changes. tools/install_vllm.sh installs it only where `probe()` shows
the bug, and a session run on a patched server says so in its configuration.
"""

import sys
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

_TARGET = "vllm._custom_ops"
_OP = "causal_conv1d_fwd_cpu"


def _as_transposed(x: Any) -> Any:
    """`x` (channels, tokens) as the transpose of a contiguous (tokens, channels) tensor."""
    if x.dim() == 2 and x.stride(0) == 1 and x.stride(1) != x.size(0):
        # Not .contiguous(): a one-token slice already counts as contiguous, long rows and all.
        return x.new_empty((x.size(1), x.size(0))).copy_(x.t()).t()
    return x


def _wrap(op: Callable[..., Any]) -> Callable[..., Any]:
    """`op`, with its `x` (keyword or first argument) put in the layout it requires."""
    def fixed(*args: Any, **kwargs: Any) -> Any:
        if "x" in kwargs:
            kwargs["x"] = _as_transposed(kwargs["x"])
        elif args:
            args = (_as_transposed(args[0]), *args[1:])
        return op(*args, **kwargs)
    fixed.__wrapped__ = op  # type: ignore[attr-defined]
    return fixed


class _PatchAfterExec(Loader):
    """Runs the real loader, then wraps the op in the module it made."""

    def __init__(self, real: Loader) -> None:
        self._real = real

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._real.exec_module(module)
        if hasattr(module, _OP):
            setattr(module, _OP, _wrap(getattr(module, _OP)))


class _PatchCustomOps(MetaPathFinder):
    """On the first import of `vllm._custom_ops`, hands its loader a patching wrapper."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != _TARGET:
            return None
        sys.meta_path.remove(self)
        from importlib.util import find_spec

        spec = find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchAfterExec(spec.loader)
        return spec


def probe() -> str:
    """'bug' where vLLM's C++ convolution refuses a column-sliced input on this CPU,
    'fine' where it takes it, 'absent' where this CPU runs the torch fallback."""
    import torch
    from vllm import _custom_ops as ops

    if not torch.cpu._is_avx512_bf16_supported():
        return "absent"
    channels, width, tokens = 64, 4, 3
    rows = torch.randn(tokens, channels + 16, dtype=torch.bfloat16)[:, :channels]
    try:
        getattr(ops, _OP)(
            x=rows.transpose(0, 1), weight=torch.randn(channels, width, dtype=torch.bfloat16),
            bias=None, conv_states=torch.zeros(1, channels, width - 1, dtype=torch.bfloat16),
            query_start_loc=torch.tensor([0, tokens], dtype=torch.int32),
            cache_indices=torch.tensor([0], dtype=torch.int32),
            has_initial_state=torch.tensor([False]), silu_activation=True,
            is_weight_packed=False)
    except RuntimeError as exc:
        if "expect x to be transposed" in str(exc):
            return "bug"
        raise
    return "fine"


def install() -> None:
    """Patch the op when vLLM first imports it (the .pth line calls this at startup)."""
    sys.meta_path.insert(0, _PatchCustomOps())


if __name__ == "__main__":
    print(probe())
