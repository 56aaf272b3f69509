"""The torch backend under re-execution: a session re-executed on the same machine
reproduces every event, digests included; and the draft-model checkpoint bug (PR 22521)
is found by the postmortem and gone in the counterfactual that keeps the checkpoints."""

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from engine.config import RunConfig  # noqa: E402
from engine.hybrid.backend import TorchBackend  # noqa: E402
from engine.hybrid.tokenizer import VOCAB_SIZE, build_tokenizer  # noqa: E402
from engine.session import Session  # noqa: E402
from eventlog import Recorder, create_session, get_session, open_db  # noqa: E402
from eventlog.postmortem import Kind, Severity, postmortem_session  # noqa: E402
from specledger.runs.rerun import rerun  # noqa: E402

LIN, FULL = "linear_attention", "full_attention"


def _save_model(path: Path, hidden: int, layers: list[str], seed: int) -> None:
    torch.manual_seed(seed)
    cfg = transformers.Qwen3_5TextConfig(
        vocab_size=VOCAB_SIZE, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=len(layers), layer_types=layers, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=1, linear_num_value_heads=2, linear_conv_kernel_dim=4,
        tie_word_embeddings=True)
    model = transformers.Qwen3_5ForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(0.05, 2.0).log())
            elif "norm" not in name:
                p.normal_(0.0, 2.0 / math.sqrt(p.shape[-1]))  # peaked: drafts sometimes match
    model.save_pretrained(path)
    build_tokenizer().save(str(path / "tokenizer.json"))


class _ShortQuestions:
    """Short byte-pattern questions keep the test fast; the re-run reads them from the log."""

    def question(self, slot: int, turn: int) -> list[int]:
        return [97 + (slot * 7 + turn * 3 + i) % 26 for i in range(40 if turn == 1 else 10)]


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # Tiny matrices: on a shared 2-core machine, intra-op threads only spin (20x slower).
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("models")
    _save_model(root / "target", 64, [LIN, LIN, FULL, LIN], seed=1)
    _save_model(root / "draft", 32, [LIN, FULL], seed=2)
    return {"backend": "torch", "model": str(root / "target"),
            "draft_model": str(root / "draft"), "drafter": "draft-model", "turns": 2,
            "max_answer_tokens": 16, "draft_max": 4}


def _record(db: str, config: RunConfig) -> int:
    engine = open_db(db, create=True)
    sid = create_session(engine, config=config.to_dict(), backend="torch",
                         seeds={"seed": config.seed}, code_version="test")
    with Recorder(engine, sid) as rec:
        Session(config, rec, backend=TorchBackend(config), conversation=_ShortQuestions()).run()
    return sid


def test_torch_session_reexecutes_event_for_event(models: dict[str, Any],
                                                  tmp_path: Path) -> None:
    db = str(tmp_path / "torch.db")
    sid = _record(db, RunConfig(**models, temperature=0.8, top_k=20, seed=3))
    result = rerun(db, sid)
    engine = open_db(db, create=False)
    assert result.divergence is None and result.error is None
    assert result.compared == get_session(engine, sid).events == get_session(
        engine, result.session).events


def test_draft_checkpoint_discard_found_and_fixed(models: dict[str, Any],
                                                  tmp_path: Path) -> None:
    db = str(tmp_path / "torch.db")
    sid = _record(db, RunConfig(**models, draft_checkpoints="discard"))
    engine = open_db(db, create=False)
    found = {f.kind: f for f in postmortem_session(engine, sid).findings}
    f = found[Kind.DRAFT_CHECKPOINT_DISCARD]
    assert f.turn == 2 and f.numbers["recomputed_tokens"] >= 40  # the first prompt, again
    fixed = rerun(db, sid, {"draft_checkpoints": "keep"})
    assert fixed.counterfactual and all(t.same_output for t in fixed.turns)
    pm = postmortem_session(engine, fixed.session)
    assert not pm.has(Severity.ERROR)
    assert Kind.DRAFT_CHECKPOINT_DISCARD not in {x.kind for x in pm.findings}
