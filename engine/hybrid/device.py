"""Which device the torch backend runs on: one setting (`auto`, `cpu`, `cuda`) resolved
once, and recorded resolved with the session, like the kernel switch; and the torch dtype
of the `dtype` setting."""

import torch

from engine.errors import BackendError

DEVICES = ("auto", "cpu", "cuda")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def resolve_device(name: str) -> torch.device:
    """`auto` is CUDA when torch sees a GPU, else the CPU; `cuda` without one is an error
    a user can act on rather than a failure deep inside the first forward."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise BackendError(f"device: cuda requested, but torch {torch.__version__} sees no "
                           "CUDA device; use --device cpu (or auto)")
    if name not in DEVICES:
        raise BackendError(f"device: '{name}' is not one of {', '.join(DEVICES)}")
    return torch.device(name)


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a `dtype` setting names (float32 or bfloat16)."""
    if name not in DTYPES:
        raise BackendError(f"dtype: '{name}' is not one of {', '.join(DTYPES)}")
    return DTYPES[name]


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a wall-clock reading means it is done (CUDA
    runs asynchronously; the CPU has nothing to wait for)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
