"""The references agree with HF transformers' Qwen3.5 code, and the dispatch layer behaves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from speckernels import ops
from speckernels.backend import KernelBackend, resolve_backend

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hf():
    """HF's Qwen3.5 modeling module (skips where transformers lacks it)."""
    return pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")


@pytest.mark.parametrize("l2norm", [False, True])
def test_gdn_reference_matches_hf(hf, gdn_inputs, check, l2norm):
    """Grouped heads, in-kernel l2norm and fp32 state follow HF's recurrent gated delta rule."""
    inp = gdn_inputs(bsz=2, seq=4, heads=2, hv=4, normalized=not l2norm)
    slots = torch.arange(2)
    start = inp["state"][:2].clone()
    o_hf, final_hf = hf.torch_recurrent_gated_delta_rule(
        inp["q"], inp["k"], inp["v"], g=inp["g"], beta=inp["beta"], initial_state=start,
        output_final_state=True, use_qk_l2norm_in_kernel=l2norm,
    )  # fmt: skip
    pool = start.clone()
    o, inter = ops.gdn_verify(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"], pool,
                              state_indices=slots, commit=True, use_qk_l2norm=l2norm,
                              backend="torch")  # fmt: skip
    check("o", o, o_hf, 1e-6)
    check("final", pool, final_hf, 1e-6)
    check("last-intermediate", inter[:, -1], final_hf, 1e-6)


def test_conv_reference_matches_hf(hf, check):
    """With HF's window (S = KW) the conv update matches causal_conv1d_update, window too."""
    x = torch.randn(2, 6, 3)  # (B, C, T)
    window = torch.randn(2, 6, 4)  # (B, C, S = KW)
    weight, bias = torch.randn(6, 4), torch.randn(6)
    hf_window = window.clone()
    out_hf = hf.causal_conv1d_update(x, hf_window, weight, bias, activation="silu")
    pool = window.clone()
    out, _ = ops.conv_update(x, pool, weight, bias, commit=True, backend="torch")
    check("out", out, out_hf, 1e-6)
    check("window", pool, hf_window, 0.0)


def test_auto_backend_resolution():
    """auto is triton on CUDA (when installed) and torch on CPU, even under the interpreter."""
    assert resolve_backend("auto", "cpu") is KernelBackend.TORCH
    assert resolve_backend(KernelBackend.TORCH, "cpu") is KernelBackend.TORCH
    expected = KernelBackend.TRITON if _has_triton() else KernelBackend.TORCH
    assert resolve_backend("auto", "cuda") is expected
    with pytest.raises(ValueError):
        resolve_backend("cuda-graphs", "cpu")


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    """Asking for triton on CPU without TRITON_INTERPRET fails loudly, not silently slow."""
    if not _has_triton():
        pytest.skip("triton is not installed")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        resolve_backend("triton", "cpu")


def test_ops_import_and_run_without_triton():
    """speckernels.ops and .reference import, and the torch backend runs, with triton absent."""
    code = (
        "import sys, importlib.util as u\n"
        "_find = u.find_spec\n"
        "import torch\n"
        "sys.modules['triton'] = None\n"
        "u.find_spec = lambda name, *a: None if name == 'triton' else _find(name, *a)\n"
        "from speckernels import ops, reference\n"
        "s = torch.zeros(1, 1, 2, 2)\n"
        "o, _ = ops.gdn_verify(*(torch.ones(1, 1, 1, 2),) * 3, torch.zeros(1, 1, 1),\n"
        "                      torch.ones(1, 1, 1), s, commit=True)\n"
        "assert 'triton' not in sys.modules or sys.modules['triton'] is None\n"
        "print(ops.resolve_backend('auto', 'cuda'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "torch"


@pytest.mark.parametrize(
    ("shape_k", "shape_v", "shape_state", "message"),
    [
        ((1, 2, 3, 4), (1, 2, 4, 4), (1, 4, 4, 4), "multiple"),
        ((1, 2, 2, 4), (1, 2, 4, 4), (1, 4, 4, 5), "state must be"),
        ((1, 0, 2, 4), (1, 0, 2, 4), (1, 2, 4, 4), "T >= 1"),
    ],
)
def test_verify_rejects_bad_shapes(shape_k, shape_v, shape_state, message):
    """Shape mistakes are ValueErrors naming the rule, before any kernel runs."""
    k, v = torch.zeros(shape_k), torch.zeros(shape_v)
    gb = torch.zeros(*shape_v[:3])
    with pytest.raises(ValueError, match=message):
        ops.gdn_verify(k, k, v, gb, gb, torch.zeros(shape_state), backend="torch")


def _has_triton() -> bool:
    """Whether triton is importable here."""
    from speckernels.backend import triton_available

    return triton_available()
