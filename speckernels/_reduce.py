"""``fsum``: tl.sum that also runs under the Triton interpreter when triton was imported first.

tl.sum is itself a @triton.jit function of triton.language.standard, decorated when triton
is imported. If that happened before TRITON_INTERPRET=1 was set (a test session that
imported transformers earlier), the interpreter meets a compiled JITFunction there and
refuses to call it. tl.reduce is a builtin the interpreter patches, and ``_sum_combine`` is
the combine function its numpy fast path recognises; compiled, this is what tl.sum lowers
to for fp32 inputs.

Imports triton at module import: load it only through the kernel modules.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    """Fallback combine function for triton versions without ``_sum_combine``."""
    return a + b


_COMBINE = getattr(tl.standard, "_sum_combine", _add)


@triton.jit
def fsum(x, axis: tl.constexpr = None):
    """Sum of fp32 ``x`` over ``axis`` (all axes when None)."""
    return tl.reduce(x, axis, _COMBINE)
