"""Kernel tests run the Triton kernels on CPU under the Triton interpreter, or compiled on
the GPU with ``--device cuda`` (every tensor a test makes is then on the GPU).

TRITON_INTERPRET must be set before any kernel module is decorated, so ``pytest_configure``
sets it, for a CPU run only. ``speckernels.ops`` never picks the interpreter on its own
(``auto`` means torch on CPU), so setting it does not change any other test's backend.

Each test draws a fresh seed (override with SPECLEDGER_KERNEL_SEED to reproduce one); the
seed is printed and attached to failure reports. Relative errors of every comparison are
collected and summarised at the end of the run.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator

import pytest
import torch

from speckernels.backend import interpreter_enabled, triton_available
from speckernels.testing import rel_error

_SEED_KEY = pytest.StashKey[int]()
_ERRORS: dict[str, float] = {}
_INDEX = re.compile(r"\[.*?\]")


def pytest_configure(config: pytest.Config) -> None:
    """On CPU, run the kernels under the interpreter (unless TRITON_INTERPRET says otherwise);
    with --device cuda leave it unset, so they compile (tests/conftest.py refuses a 1 there).

    Early enough: triton.jit picks interpreter or compiler when it decorates a kernel, and
    no kernel is decorated before a test calls one. ``speckernels.ops`` imports the kernel
    modules inside its triton branches only; no test module, conftest or engine module
    imports them at module level (the tests here load ``ops``, ``reference``, ``backend``
    and ``testing``). This hook runs as soon as this conftest is registered, during
    collection, and pytest collects every file before it runs any test.
    """
    if config.getoption("device") == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")


@pytest.fixture(autouse=True)
def on_device(torch_device: torch.device) -> Iterator[None]:
    """Every tensor a test makes without ``device=`` (inputs, pools, slots, indices) is on
    the run's device; the CPU run is left exactly as it was (no default-device mode)."""
    if torch_device.type == "cpu":
        yield
        return
    previous = torch.get_default_device()
    torch.set_default_device(torch_device)
    try:
        yield
    finally:
        torch.set_default_device(previous)


@pytest.fixture(autouse=True)
def seed(request: pytest.FixtureRequest) -> int:
    """A fresh torch seed per test, printed and remembered for the failure report."""
    value = int(os.environ.get("SPECLEDGER_KERNEL_SEED") or secrets.randbits(31))
    request.node.stash[_SEED_KEY] = value
    torch.manual_seed(value)
    print(f"SPECLEDGER_KERNEL_SEED={value}")
    return value


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Attach the seed to failed reports so a failure can be replayed exactly."""
    report = yield
    if report.failed and _SEED_KEY in item.stash:
        report.sections.append(("seed", f"SPECLEDGER_KERNEL_SEED={item.stash[_SEED_KEY]}"))
    return report


@pytest.fixture
def triton_backend(torch_device: torch.device) -> str:
    """The backend name for kernel runs; skips where they cannot run: no triton, or CPU
    tensors without the interpreter."""
    if not triton_available():
        pytest.skip("triton is not installed")
    if torch_device.type == "cpu" and not interpreter_enabled():
        pytest.skip("TRITON_INTERPRET is off: the kernels cannot run on CPU tensors")
    return "triton"


@pytest.fixture
def check(seed: int, request: pytest.FixtureRequest) -> Callable[..., float]:
    """check(name, out, ref, tol): assert finite and ||out - ref|| / ||ref|| <= tol.

    The error is recorded for the end-of-run summary under the test's base name and
    ``name``; the assertion message carries the seed.
    """
    base = request.node.originalname

    def _check(name: str, out: torch.Tensor, ref: torch.Tensor, tol: float = 1e-5) -> float:
        assert out.shape == ref.shape, f"{name}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
        nans = int(torch.isnan(out.float()).sum())
        assert nans == 0, f"{name}: {nans} NaN (unwritten or poisoned) elements, seed={seed}"
        err = rel_error(out, ref)
        key = base + ":" + _INDEX.sub("", name)  # one summary line per check, not per index
        _ERRORS[key] = max(_ERRORS.get(key, 0.0), err)
        assert err <= tol, f"{name}: relative error {err:.3e} > {tol:.1e}, seed={seed}"
        return err

    return _check


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the largest relative error seen per kernel comparison."""
    if not _ERRORS:
        return
    terminalreporter.section("kernels: max relative error ||out - ref|| / ||ref||")
    for key in sorted(_ERRORS):
        terminalreporter.write_line(f"{_ERRORS[key]:10.2e}  {key}")


@pytest.fixture
def gdn_inputs() -> Callable[..., dict[str, torch.Tensor]]:
    """Factory of random verify-batch inputs with a state pool bigger than the batch.

    Returns a dict with q, k (B, T, H, K), v (B, T, HV, V), g, beta (B, T, HV), state
    (N, HV, K, V) fp32 and slots (B,) distinct pool indices in random order.
    """

    def _make(
        bsz: int = 2, seq: int = 5, heads: int = 2, hv: int = 4, kdim: int = 16,
        vdim: int = 16, dtype: torch.dtype = torch.float32, normalized: bool = True,
    ) -> dict[str, torch.Tensor]:  # fmt: skip
        q = torch.randn(bsz, seq, heads, kdim)
        k = torch.randn(bsz, seq, heads, kdim)
        if normalized:  # what HF's caller passes when use_qk_l2norm_in_kernel is off
            q, k = (torch.nn.functional.normalize(x, dim=-1) for x in (q, k))
        pool = bsz + 2
        return {
            "q": q.to(dtype),
            "k": k.to(dtype),
            "v": torch.randn(bsz, seq, hv, vdim).to(dtype),
            # Log decays like Qwen3.5's -exp(A_log) * softplus(a + dt_bias): <= 0, mostly small.
            "g": -torch.nn.functional.softplus(torch.randn(bsz, seq, hv)) * torch.rand(1).item(),
            "beta": torch.rand(bsz, seq, hv).to(dtype),
            "state": 0.1 * torch.randn(pool, hv, kdim, vdim),
            "slots": torch.randperm(pool)[:bsz],
        }

    return _make
