"""The workaround of vLLM's causal-conv1d layout bug (adapters/vllm/conv_layout.py): the op
gets the same values in the layout it requires, and inputs already in it pass untouched."""

import subprocess

import pytest
import torch

from adapters.vllm import conv_layout
from adapters.vllm.paths import workarounds
from tests.adapters.vllm.conftest import require_vllm


@pytest.mark.parametrize("tokens", [1, 2, 7])
def test_a_column_slice_is_copied_into_the_transposed_layout(tokens: int) -> None:
    rows = torch.randn(tokens, 80)[:, :64]  # q, k, v of a fused projection: rows longer
    x = rows.transpose(0, 1)  # (channels, tokens), as vLLM hands it to the op
    fixed = conv_layout._as_transposed(x)
    assert torch.equal(fixed, x)
    assert fixed.stride() == (1, 64)  # the transpose of a contiguous (tokens, channels)


def test_an_input_in_the_required_layout_is_not_copied() -> None:
    x = torch.randn(5, 64).transpose(0, 1)
    assert conv_layout._as_transposed(x) is x


def test_the_wrapped_op_sees_the_fixed_input_by_keyword_or_position() -> None:
    seen: list[tuple[int, ...]] = []
    op = conv_layout._wrap(lambda x, **kw: seen.append(x.stride()))
    x = torch.randn(3, 80)[:, :64].transpose(0, 1)
    op(x=x, weight=None)
    op(x)
    assert seen == [(1, 64), (1, 64)]


@pytest.mark.vllm
def test_vllm_takes_a_column_slice_on_this_cpu_with_the_workaround_where_needed() -> None:
    python = require_vllm()
    # The probe, run in vLLM's environment as installed: the hook (where installed) is in.
    found = subprocess.run([str(python), conv_layout.__file__], capture_output=True,
                           text=True, timeout=300, check=True).stdout.strip()
    assert found in ("fine", "absent")
    # Installed exactly where this CPU takes vLLM's C++ conv path (the probe's own test).
    assert ("conv_layout" in workarounds()) == bool(torch.cpu._is_avx512_bf16_supported())
