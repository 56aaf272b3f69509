"""The converters suite in quick form: the default build (and one other, where built)
exports the target, the exports are compared, every server answers on every GGUF, and the
table, the answer matrix and the incidents agree; plus the pure pieces that judge a
cell."""

from pathlib import Path

from adapters.llama.builds.matrix import MATRIX
from adapters.llama.server.paths import DEFAULT_BUILD, built
from engine.hybrid.tokenizer import decode
from specbench.converters import plan_for, tensor_groups, verdict
from specbench.converters.runs import (
    NO_MTP,
    Cell,
    Outcome,
    first_difference,
    held_out_prompts,
)
from tests.specbench.llama_quick import run_quick


def test_quick_run(tmp_path: Path) -> None:
    result, data = run_quick("converters", tmp_path)
    builds = data["plan"]["builds"]
    assert builds[0] == DEFAULT_BUILD and len(builds) == min(2, sum(map(built, MATRIX)))
    assert set(data["skipped"]) == {b for b in MATRIX if not built(b)}
    assert data["diffs"][f"{DEFAULT_BUILD}/target"]["identical"] is True
    rows = {(r["build"], r["model"]): r for r in data["rows"]}
    assert set(rows) == {(b, "target") for b in builds} | {(DEFAULT_BUILD, NO_MTP)}
    home = rows[DEFAULT_BUILD, "target"]
    assert (home["metadata"], home["tensors"], home["max_abs_diff"]) == ("same", "same", 0.0)
    assert home["default_server"] == home["own_server"] == home["on_default_gguf"] == "same"
    # Without the MTP head the target computes as with it; only its nextn block is gone.
    assert rows[DEFAULT_BUILD, NO_MTP]["default_server"] == "same"
    assert rows[DEFAULT_BUILD, NO_MTP]["tensors"].startswith("15 removed: blk.8.*")
    cells = {(c["server"], c["gguf_build"], c["model"]): c for c in data["cells"]}
    assert set(cells) == {(s, b, "target") for s in builds for b in builds} | {
        (s, DEFAULT_BUILD, NO_MTP) for s in builds}
    reference = cells[DEFAULT_BUILD, DEFAULT_BUILD, "target"]
    assert reference["outcome"] == "answered" and reference["same_prompt_ids"] is True
    assert data["reference_is_torch"] == {"target": True}  # the ground truth
    assert len(reference["answers"]) == 2 and all(0 < len(a) <= 32
                                                  for a in reference["answers"])
    differing = {(c["server"], c["gguf_build"], c["model"]) for c in data["cells"]
                 if c["outcome"] == "answered" and c["answers"] != reference["answers"]}
    assert {(i["server"], i["gguf_build"], i["model"]) for i in data["incidents"]} == differing
    for b in builds:  # a GGUF identical to the default's computes as it does
        if data["diffs"][f"{b}/target"]["identical"]:
            assert (DEFAULT_BUILD, b, "target") not in differing
    text = (tmp_path / "converters" / "converters.md").read_text()
    assert f"| {DEFAULT_BUILD} | target | same | same | 0 | same | same | same |" in text
    assert result.table in text


def test_the_quick_plan_takes_the_default_and_the_newest_other_build() -> None:
    assert plan_for(True, ["0.3.21", "0.3.24", DEFAULT_BUILD]).builds == (DEFAULT_BUILD,
                                                                        "0.3.24")
    assert plan_for(True, [DEFAULT_BUILD]).builds == (DEFAULT_BUILD,)
    full = plan_for(False, [DEFAULT_BUILD, "0.3.20"])
    assert full.builds == ("0.3.20", DEFAULT_BUILD) and full.models == ("target", "draft")


def test_a_cell_is_judged_by_its_first_differing_token() -> None:
    ref = Cell("a", "a", "target", Outcome.ANSWERED, ((1, 2, 3), (4, 5)), True)
    assert verdict(ref, ref) == "same"
    late = Cell("a", "b", "target", Outcome.ANSWERED, ((1, 2, 3), (4, 6)), True)
    assert verdict(late, ref) == "**differs** at prompt 1 token 1"
    short = Cell("a", "b", "target", Outcome.ANSWERED, ((1, 2),  (4, 5)), False)
    assert verdict(short, ref) == ("**differs** at prompt 0 token 2 (its template/tokenizer "
                                   "differ)")
    refused = Cell("a", "b", "target", Outcome.REFUSED, error="key not found: x")
    assert verdict(refused, ref) == "refused: key not found: x"
    assert first_difference([[1, 2]], [[1, 2]]) is None


def test_tensor_names_of_one_block_fold() -> None:
    names = ["blk.8.nextn.eh_proj.weight", "blk.8.attn_q.weight", "output_norm.weight"]
    assert tensor_groups(names) == "blk.8.* (2), output_norm.weight"


def test_the_prompts_are_the_chatml_of_held_out_questions() -> None:
    prompts = held_out_prompts(2)
    assert len({p.question for p in prompts}) == 2
    for p in prompts:
        assert decode(list(p.ids)) == (f"<|im_start|>user\n{p.question}<|im_end|>\n"
                                       "<|im_start|>assistant\n")
