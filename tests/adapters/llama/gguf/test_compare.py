"""GGUF comparison: keys added, removed and changed with their values, tensors added and
removed, shape and type changes, and the largest difference of each common tensor's values,
on small files written here with the default build's gguf-py, and on contents built in
memory."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from adapters.llama.errors import GgufExportError
from adapters.llama.gguf.compare import (
    GgufContents,
    Tensor,
    compare,
    compare_files,
    describe_change,
    gguf_module,
    max_abs_difference,
    read_gguf,
)
from adapters.llama.server.paths import require_converter
from tests.adapters.llama.conftest import require_llama


def write_gguf(path: Path, keys: dict[str, Any], tensors: dict[str, np.ndarray]) -> Path:
    """A GGUF file of architecture qwen35 with `keys` (ints as uint32, strings, lists of
    ints, bools) and `tensors`, written by the default build's gguf-py."""
    require_llama(require_converter)
    gguf = gguf_module()
    w = gguf.GGUFWriter(path, "qwen35")
    for key, value in keys.items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif isinstance(value, int):
            w.add_uint32(key, value)
        elif isinstance(value, str):
            w.add_string(key, value)
        else:
            w.add_array(key, value)
    for name, data in tensors.items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _weights() -> dict[str, np.ndarray]:
    return {"tok.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
            "norm.weight": np.ones(4, dtype=np.float32)}


def test_a_file_compared_with_itself_is_identical(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "a.gguf", {"qwen35.block_count": 2}, _weights())
    diff = compare_files(path, path)
    assert diff.identical and diff.max_abs_diff == 0.0
    assert set(diff.max_abs) == {"tok.weight", "norm.weight"}


def test_keys_tensors_and_values_that_differ_are_named(tmp_path: Path) -> None:
    a = write_gguf(tmp_path / "a.gguf",
                   {"qwen35.rope.dimension_count": 16, "qwen35.nextn_predict_layers": 1,
                    "qwen35.recurrent": [True, True, False], "x.name": "old"},
                   _weights() | {"blk.8.nextn.eh_proj.weight": np.zeros((2, 2), np.float32)})
    weights = _weights()
    weights["tok.weight"] = weights["tok.weight"].copy()
    weights["tok.weight"][1, 2] += 0.25
    b = write_gguf(tmp_path / "b.gguf",
                   {"qwen35.rope.dimension_count": 8, "x.name": "old", "x.added": 3},
                   weights | {"norm.weight": np.ones(4, dtype=np.float16)})
    diff = compare_files(a, b)
    assert not diff.identical and not diff.same_metadata and not diff.same_tensors
    assert diff.keys_added == {"x.added": 3}
    assert diff.keys_removed == {"qwen35.nextn_predict_layers": 1,
                                 "qwen35.recurrent": [True, True, False]}
    assert [(c.key, c.old, c.new) for c in diff.keys_changed] == [
        ("qwen35.rope.dimension_count", 16, 8)]
    assert diff.keys_changed[0].describe() == "qwen35.rope.dimension_count: 16 -> 8"
    assert diff.tensors_removed == ("blk.8.nextn.eh_proj.weight",) and not diff.tensors_added
    [layout] = diff.layout_changed
    assert (layout.name, layout.old_dtype, layout.new_dtype) == ("norm.weight", "F32", "F16")
    assert layout.describe() == "norm.weight: F32 -> F16"
    assert diff.max_abs == {"tok.weight": 0.25, "norm.weight": 0.0}  # 1.0 is exact in f16
    assert diff.differing_tensors == ("tok.weight",) and diff.max_abs_diff == 0.25
    doc = diff.to_dict()
    assert doc["keys_changed"] == {"qwen35.rope.dimension_count": "16 -> 8"}
    assert doc["layout_changed"] == ["norm.weight: F32 -> F16"]


def test_a_reshaped_tensor_is_a_layout_change_without_a_value_difference(
        tmp_path: Path) -> None:
    a = write_gguf(tmp_path / "a.gguf", {}, {"w": np.zeros((2, 6), np.float32)})
    b = write_gguf(tmp_path / "b.gguf", {}, {"w": np.zeros((3, 4), np.float32)})
    diff = compare_files(a, b)
    assert diff.layout_changed[0].describe() == "w: [6, 2] -> [4, 3]"  # GGML order
    assert diff.max_abs == {}


def test_a_file_that_is_not_gguf_is_refused_in_one_line(tmp_path: Path) -> None:
    require_llama(require_converter)
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(GgufExportError, match="not a readable GGUF file"):
        read_gguf(bad)


def test_a_list_change_is_shown_by_its_first_difference() -> None:
    assert describe_change([1, 2, 3], [1, 5, 3, 4]) == (
        "3 -> 4 items, first difference at [1]: 2 -> 5")
    assert describe_change([1, 2], [1, 2, 3]) == (
        "2 -> 3 items, first difference at [2]: (end) -> 3")
    assert describe_change("x" * 200, 1).startswith("'xxx") and len(
        describe_change("x" * 200, 1)) < 100


def test_non_finite_values_count_as_equal_only_to_themselves() -> None:
    nan, inf = float("nan"), float("inf")
    assert max_abs_difference(np.array([nan, inf, 1.0]), np.array([nan, inf, 1.5])) == 0.5
    assert max_abs_difference(np.array([nan]), np.array([0.0])) == inf
    assert max_abs_difference(np.array([inf]), np.array([-inf])) == inf


_finite = arrays(np.float32, st.integers(1, 6),
                 elements=st.floats(-1e3, 1e3, width=32, allow_nan=False))


@settings(max_examples=30, deadline=None)
@given(_finite, st.data())
def test_the_difference_is_symmetric_and_zero_only_for_equal_values(
        a: np.ndarray, data: st.DataObject) -> None:
    b = data.draw(arrays(np.float32, a.shape,
                         elements=st.floats(-1e3, 1e3, width=32, allow_nan=False)))
    ca = GgufContents({}, {"w": Tensor(a.shape, "F32", a)})
    cb = GgufContents({}, {"w": Tensor(b.shape, "F32", b)})
    ab, ba = compare(ca, cb), compare(cb, ca)
    assert ab.max_abs == ba.max_abs
    assert (ab.max_abs["w"] == 0.0) == bool(np.array_equal(a, b))
    assert ab.max_abs["w"] == pytest.approx(float(np.max(np.abs(
        a.astype(np.float64) - b.astype(np.float64)))))
