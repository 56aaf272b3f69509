"""A checkpoint directory's digest, the same for every engine that runs it (our torch
backend, vLLM): a session stores it, and a re-execution or a comparison of engines can tell
the same weights from others."""

import hashlib
from pathlib import Path


def checkpoint_digest(root: Path) -> str:
    """sha256 over the checkpoint's config and weight files (names and bytes, in order),
    its first 16 hex digits."""
    h = hashlib.sha256()
    for file in [root / "config.json", *sorted(root.glob("*.safetensors"))]:
        h.update(file.name.encode())
        h.update(file.read_bytes())
    return h.hexdigest()[:16]
