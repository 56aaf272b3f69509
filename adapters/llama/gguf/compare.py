"""What differs between two GGUF files: metadata keys added, removed or changed, tensors
added or removed, tensors whose shape or type changed, and for every tensor the two share
the largest absolute difference of its values.

The files are read with the default build's own gguf-py reader (`read_gguf`: one `gguf`
package per process, so one build's), tensors dequantized to float32 so an f16 file
compares with an f32 one; `compare` is pure over what was read, so it is tested on files
written in a test.
"""

import importlib
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from adapters.llama.errors import GgufExportError
from adapters.llama.server.paths import DEFAULT_BUILD, require_converter

# The reader's own bookkeeping, derived from the rest (the version stays: it is a fact).
_DERIVED_KEYS = ("GGUF.tensor_count", "GGUF.kv_count")
_SHOWN_ITEMS = 4
_SHOWN_CHARS = 80


@dataclass(frozen=True)
class Tensor:
    """One tensor as the file stores it: shape in GGML order (innermost first), type
    name, and its values as float32."""

    shape: tuple[int, ...]
    dtype: str
    values: np.ndarray


@dataclass(frozen=True)
class GgufContents:
    """A GGUF file's metadata (key -> value, strings and lists as Python values) and
    tensors by name."""

    metadata: dict[str, Any]
    tensors: dict[str, Tensor]


@dataclass(frozen=True)
class KeyChange:
    """A metadata key whose value differs."""

    key: str
    old: Any
    new: Any

    def describe(self) -> str:
        """`key: old -> new`, long values shortened, lists by their first difference."""
        return f"{self.key}: {describe_change(self.old, self.new)}"


@dataclass(frozen=True)
class LayoutChange:
    """A tensor both files hold with another shape or type."""

    name: str
    old_shape: tuple[int, ...]
    new_shape: tuple[int, ...]
    old_dtype: str
    new_dtype: str

    def describe(self) -> str:
        """`name: [a, b] F32 -> [c, d] F16` (only what changed)."""
        old = [str(list(self.old_shape))] if self.old_shape != self.new_shape else []
        new = [str(list(self.new_shape))] if self.old_shape != self.new_shape else []
        if self.old_dtype != self.new_dtype:
            old, new = [*old, self.old_dtype], [*new, self.new_dtype]
        return f"{self.name}: {' '.join(old)} -> {' '.join(new)}"


@dataclass(frozen=True)
class GgufDiff:
    """Everything that differs from file `a` (old) to file `b` (new). `max_abs` holds,
    per tensor present in both with the same shape, the largest |a - b| of its values
    (inf where one is NaN or infinite and the other is not)."""

    keys_added: dict[str, Any] = field(default_factory=dict)
    keys_removed: dict[str, Any] = field(default_factory=dict)
    keys_changed: tuple[KeyChange, ...] = ()
    tensors_added: tuple[str, ...] = ()
    tensors_removed: tuple[str, ...] = ()
    layout_changed: tuple[LayoutChange, ...] = ()
    max_abs: dict[str, float] = field(default_factory=dict)

    @property
    def same_metadata(self) -> bool:
        """Whether both files hold the same keys with the same values."""
        return not (self.keys_added or self.keys_removed or self.keys_changed)

    @property
    def same_tensors(self) -> bool:
        """Whether both files hold the same tensor names, shapes and types."""
        return not (self.tensors_added or self.tensors_removed or self.layout_changed)

    @property
    def max_abs_diff(self) -> float:
        """The largest difference over every common tensor (0.0 when none differs)."""
        return max(self.max_abs.values(), default=0.0)

    @property
    def differing_tensors(self) -> tuple[str, ...]:
        """The common tensors whose values differ, largest difference first."""
        return tuple(sorted((n for n, d in self.max_abs.items() if d != 0.0),
                            key=lambda n: -self.max_abs[n]))

    @property
    def identical(self) -> bool:
        """Whether the two files hold the same metadata and the same tensor values."""
        return self.same_metadata and self.same_tensors and self.max_abs_diff == 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able mapping (values shown as `describe` shows them)."""
        return {"keys_added": {k: show(v) for k, v in self.keys_added.items()},
                "keys_removed": {k: show(v) for k, v in self.keys_removed.items()},
                "keys_changed": {c.key: describe_change(c.old, c.new)
                                 for c in self.keys_changed},
                "tensors_added": list(self.tensors_added),
                "tensors_removed": list(self.tensors_removed),
                "layout_changed": [c.describe() for c in self.layout_changed],
                "max_abs_diff": _json_float(self.max_abs_diff),
                "differing_tensors": {n: _json_float(self.max_abs[n])
                                      for n in self.differing_tensors},
                "identical": self.identical}


def _json_float(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"


def show(value: Any) -> str:
    """A metadata value in at most about 80 characters (a long list by its length and
    first items)."""
    if isinstance(value, list) and len(value) > _SHOWN_ITEMS:
        head = ", ".join(repr(v) for v in value[:_SHOWN_ITEMS])
        text = f"[{len(value)} items: {head}, ...]"
    else:
        text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS - 3] + "..."


def describe_change(old: Any, new: Any) -> str:
    """`old -> new`; for two lists, where they first differ."""
    if isinstance(old, list) and isinstance(new, list):
        at = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b),
                  min(len(old), len(new)))
        a = repr(old[at]) if at < len(old) else "(end)"
        b = repr(new[at]) if at < len(new) else "(end)"
        return f"{len(old)} -> {len(new)} items, first difference at [{at}]: {a} -> {b}"
    return f"{show(old)} -> {show(new)}"


def max_abs_difference(a: np.ndarray, b: np.ndarray) -> float:
    """The largest |a - b| over two arrays of one shape; NaN against NaN counts as equal,
    a non-finite value against anything else as inf."""
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    if x.size == 0:
        return 0.0
    both_nan = np.isnan(x) & np.isnan(y)
    same_inf = np.isinf(x) & (x == y)
    with np.errstate(invalid="ignore"):
        d = np.abs(x - y)
    d = np.where(both_nan | same_inf, 0.0, d)
    d = np.where(np.isnan(d), np.inf, d)
    return float(d.max())


def compare(a: GgufContents, b: GgufContents) -> GgufDiff:
    """What differs from `a` to `b`."""
    ka, kb = a.metadata, b.metadata
    changed = tuple(KeyChange(k, ka[k], kb[k]) for k in sorted(ka.keys() & kb.keys())
                    if ka[k] != kb[k])
    ta, tb = a.tensors, b.tensors
    common = [n for n in ta if n in tb]
    layout = tuple(LayoutChange(n, ta[n].shape, tb[n].shape, ta[n].dtype, tb[n].dtype)
                   for n in common
                   if (ta[n].shape, ta[n].dtype) != (tb[n].shape, tb[n].dtype))
    diffs = {n: max_abs_difference(ta[n].values, tb[n].values) for n in common
             if ta[n].values.shape == tb[n].values.shape}
    return GgufDiff(keys_added={k: kb[k] for k in sorted(kb.keys() - ka.keys())},
                    keys_removed={k: ka[k] for k in sorted(ka.keys() - kb.keys())},
                    keys_changed=changed,
                    tensors_added=tuple(n for n in tb if n not in ta),
                    tensors_removed=tuple(n for n in ta if n not in tb),
                    layout_changed=layout, max_abs=diffs)


def gguf_module() -> ModuleType:
    """The `gguf` package of the default build's converter (imported once per process)."""
    if "gguf" in sys.modules:
        return sys.modules["gguf"]
    sys.path.insert(0, str(require_converter(DEFAULT_BUILD) / "gguf-py"))
    try:
        return importlib.import_module("gguf")
    finally:
        sys.path.pop(0)


def read_gguf(path: str | Path) -> GgufContents:
    """The metadata and tensors of the GGUF file at `path`, read by `gguf_module`'s reader."""
    gguf = gguf_module()
    try:
        reader = gguf.GGUFReader(Path(path))
    except (OSError, ValueError) as exc:
        raise GgufExportError(f"{path} is not a readable GGUF file: {exc}") from None
    meta = {k: f.contents() for k, f in reader.fields.items() if k not in _DERIVED_KEYS}
    tensors = {t.name: Tensor(tuple(int(s) for s in t.shape), t.tensor_type.name,
                              gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32))
               for t in reader.tensors}
    return GgufContents(meta, tensors)


def compare_files(a: str | Path, b: str | Path) -> GgufDiff:
    """What differs from the GGUF file `a` to `b`, both read by `read_gguf`."""
    return compare(read_gguf(a), read_gguf(b))
