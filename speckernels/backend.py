"""The one switch between the Triton kernels and their torch references.

Nothing here imports triton: the package must import, and the torch backend must run, on
machines without it.
"""

from __future__ import annotations

import importlib.util
import os
from enum import StrEnum

import torch


class KernelBackend(StrEnum):
    """Which implementation ``speckernels.ops`` runs.

    ``auto`` resolves to ``triton`` for CUDA tensors when triton is installed and to
    ``torch`` otherwise. ``triton`` on CPU tensors is allowed only under the Triton
    interpreter (``TRITON_INTERPRET=1``), which is how the tests run the kernels; ``auto``
    never picks the interpreter, so a test session that enables it for the kernel tests
    does not slow every other CPU caller down.
    """

    AUTO = "auto"
    TRITON = "triton"
    TORCH = "torch"


def triton_available() -> bool:
    """True when the triton package can be imported (checked without importing it)."""
    return importlib.util.find_spec("triton") is not None


def interpreter_enabled() -> bool:
    """True when the Triton interpreter is on; it must be set before a kernel module loads."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def resolve_backend(
    backend: KernelBackend | str = KernelBackend.AUTO, device: torch.device | str = "cpu"
) -> KernelBackend:
    """Turn a requested backend into the concrete one (``triton`` or ``torch``) for a device.

    Sessions record the resolved value in their config so a replay runs the same code.
    Raises RuntimeError when ``triton`` is requested where it cannot run.
    """
    choice = KernelBackend(backend)
    dev = torch.device(device)
    if choice is KernelBackend.AUTO:
        if dev.type == "cuda" and triton_available():
            return KernelBackend.TRITON
        return KernelBackend.TORCH
    if choice is KernelBackend.TRITON:
        if not triton_available():
            raise RuntimeError("kernel backend 'triton' requested but triton is not installed")
        if dev.type != "cuda" and not interpreter_enabled():
            raise RuntimeError(
                f"kernel backend 'triton' needs CUDA tensors (got {dev.type}); "
                "set TRITON_INTERPRET=1 before the first kernel call to run it on CPU"
            )
    return choice
