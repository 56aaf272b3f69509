"""The torch backend under the round transaction: every strategy but `none` is lossless
and keeps the state true; `none` is caught; the log reproduces the slot.

Every model here runs on --device's device (tests/conftest.py): with --device cuda the
sessions run on the GPU, and `kernels` auto resolves to the compiled Triton kernels there,
so per_token and input_replay commit through them."""

import math
from pathlib import Path

import pytest
import torch
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

from engine.config import RunConfig
from engine.hybrid.backend import TorchBackend
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.hybrid.tokenizer import VOCAB_SIZE, build_tokenizer
from engine.session import MemoryJournal, Session
from eventlog import project
from fsm.states import Trigger

LIN, FULL = "linear_attention", "full_attention"


def _save_model(path: Path, hidden: int, layers: list[str], seed: int) -> None:
    torch.manual_seed(seed)
    cfg = Qwen3_5TextConfig(
        vocab_size=VOCAB_SIZE, hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=len(layers), layer_types=layers, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, linear_key_head_dim=16, linear_value_head_dim=16,
        linear_num_key_heads=1, linear_num_value_heads=2, linear_conv_kernel_dim=4,
        tie_word_embeddings=True,
    )
    model = Qwen3_5ForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(0.05, 2.0).log())
            elif "norm" not in name:
                # a peaked, repetitive distribution so that drafts sometimes match
                p.normal_(0.0, 2.0 / math.sqrt(p.shape[-1]))
    model.save_pretrained(path)
    build_tokenizer().save(str(path / "tokenizer.json"))


class _Questions:
    """Questions from a fixed byte pattern (the corpus is not what is tested here)."""

    def question(self, slot: int, turn: int) -> list[int]:
        n = 48 if turn == 1 else 12
        return [(97 + (slot * 7 + turn * 3 + i) % 26) for i in range(n)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, torch_device: torch.device
           ) -> tuple[LoadedCheckpoint, Path]:
    target = tmp_path_factory.mktemp("target")
    draft = tmp_path_factory.mktemp("draft")
    _save_model(target, 64, [LIN, LIN, FULL, LIN], seed=1)
    _save_model(draft, 32, [LIN, FULL], seed=2)
    return load_checkpoint(target, device=torch_device), draft


def _device(ckpt: LoadedCheckpoint) -> str:
    """The device the target was loaded on (--device's): the draft model and MTP head go
    there too."""
    return ckpt.model.embed_tokens.weight.device.type


def _run(models: tuple[LoadedCheckpoint, Path], **kw: object) -> tuple[Session, MemoryJournal]:
    ckpt, draft = models
    config = RunConfig(backend="torch", turns=2, answer_tokens=10**6, max_answer_tokens=32,
                       draft_max=4, draft_model=str(draft), model=str(ckpt.path),
                       device=_device(ckpt), **kw)
    journal = MemoryJournal()
    session = Session(config, journal, backend=TorchBackend(config, ckpt),
                      conversation=_Questions())
    session.run()
    return session, journal


def _answers(journal: MemoryJournal) -> list[int]:
    return [t for e in journal.events for t in e.payload.get("append", [])
            if e.trigger in (Trigger.COMMIT, Trigger.PREFILL)]


@pytest.fixture(scope="module")
def plain(models: tuple[LoadedCheckpoint, Path]) -> list[int]:
    return _answers(_run(models, drafter="none")[1])


@pytest.mark.parametrize("strategy", ["checkpoint", "per_token", "input_replay"])
@pytest.mark.parametrize("drafter", ["ngram-simple", "draft-model"])
def test_speculative_equals_plain_and_state_stays_true(
    models: tuple[LoadedCheckpoint, Path], plain: list[int], strategy: str, drafter: str
) -> None:
    session, spec = _run(models, drafter=drafter, strategy=strategy, ngram_n=2)
    assert _answers(spec) == plain
    assert [e for e in spec.events if e.trigger is Trigger.REJECT]
    assert not [e for e in spec.events if e.trigger is Trigger.INVARIANT_VIOLATION]
    view = project(spec.events)[0]
    live = session.view(session.slots[0])
    assert (view.tokens, view.position, view.digest) == (
        live["tokens"], live["position"], live["digest"])


def test_none_is_caught_on_real_state(models: tuple[LoadedCheckpoint, Path]) -> None:
    _, journal = _run(models, drafter="draft-model", strategy="none")
    violations = [e.payload["invariant"] for e in journal.events
                  if e.trigger is Trigger.INVARIANT_VIOLATION]
    assert "state_truth" in violations


def test_sampled_runs_repeat_exactly(models: tuple[LoadedCheckpoint, Path]) -> None:
    runs = [_run(models, drafter="draft-model", temperature=0.9, top_k=20, seed=4)[1]
            for _ in range(2)]
    assert _answers(runs[0]) == _answers(runs[1])


def test_draft_model_keeps_its_checkpoints_across_requests(
    models: tuple[LoadedCheckpoint, Path],
) -> None:
    def recomputed(policy: str) -> int:
        _, journal = _run(models, drafter="draft-model", draft_checkpoints=policy)
        drafts = [e for e in journal.events if e.trigger is Trigger.DRAFT]
        return drafts[-1].payload["draft_recomputed"]

    assert recomputed("keep") == 0
    assert recomputed("discard") > 48  # at least the first turn's prompt, again


def test_mtp_drafter_is_lossless(models: tuple[LoadedCheckpoint, Path], plain: list[int]
                                 ) -> None:
    from engine.drafters.mtp import MtpDrafter
    from engine.hybrid.mtp import MtpHead

    ckpt = models[0]
    torch.manual_seed(5)
    head = MtpHead(ckpt.model).to(_device(ckpt)).eval().requires_grad_(False)
    for strategy in ("checkpoint", "input_replay"):
        config = RunConfig(backend="torch", turns=2, answer_tokens=10**6, max_answer_tokens=32,
                           draft_max=3, model=str(ckpt.path), drafter="ngram-simple",
                           strategy=strategy, device=_device(ckpt))
        journal = MemoryJournal()
        session = Session(config, journal, backend=TorchBackend(config, ckpt),
                          conversation=_Questions())
        session.services.work[0].drafter = MtpDrafter(head)
        session.run()
        assert _answers(journal) == plain
        assert [e for e in journal.events if e.trigger is Trigger.VERIFY]
        assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]


@pytest.mark.parametrize("strategy", ["per_token", "input_replay"])
def test_triton_kernels_drive_the_same_session(
    models: tuple[LoadedCheckpoint, Path], plain: list[int], strategy: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The project's Triton kernels, under the interpreter on a CPU (compiled on CUDA): the
    # per-position states, the batched commit and the input replay come from them instead
    # of torch.
    ckpt, draft = models
    if _device(ckpt) == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    config = RunConfig(backend="torch", turns=1, answer_tokens=10**6, max_answer_tokens=12,
                       draft_max=3, model=str(ckpt.path), drafter="draft-model",
                       draft_model=str(draft), strategy=strategy, kernels="triton",
                       device=_device(ckpt))
    journal = MemoryJournal()
    backend = TorchBackend(config, ckpt)
    assert backend.kernels.value == "triton"
    # The choice travels with each call: a torch-kernel backend on the same model is not
    # switched over by building this one, nor this one by building it.
    assert TorchBackend(config.replace(kernels="torch"), ckpt).kernels.value == "torch"
    Session(config, journal, backend=backend, conversation=_Questions()).run()
    assert _answers(journal) == plain[:len(_answers(journal))]
    assert [e for e in journal.events if e.trigger is Trigger.REJECT]
    assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]


def test_backends_on_one_model_share_one_hidden_state_hook(
        models: tuple[LoadedCheckpoint, Path]) -> None:
    ckpt, _ = models
    config = RunConfig(backend="torch", model=str(ckpt.path))
    for _ in range(3):
        TorchBackend(config, ckpt)
    assert len(ckpt.model.norm._forward_hooks) == 1


@pytest.fixture(scope="module")
def bf16(models: tuple[LoadedCheckpoint, Path]) -> tuple[LoadedCheckpoint, Path]:
    """The same target, loaded in bfloat16."""
    ckpt, draft = models
    return load_checkpoint(ckpt.path, dtype=torch.bfloat16, device=_device(ckpt)), draft


@pytest.fixture(scope="module")
def plain_bf16(bf16: tuple[LoadedCheckpoint, Path]) -> list[int]:
    return _answers(_run(bf16, drafter="none", dtype="bfloat16")[1])


def test_dtype_option_loads_the_target_in_bfloat16(models: tuple[LoadedCheckpoint, Path]
                                                   ) -> None:
    ckpt, _ = models
    config = RunConfig(backend="torch", model=str(ckpt.path), dtype="bfloat16",
                       device=_device(ckpt))
    assert TorchBackend(config).model.dtype == torch.bfloat16
    assert TorchBackend(config.replace(dtype="float32")).model.dtype == torch.float32


@pytest.mark.parametrize("strategy", ["checkpoint", "per_token", "input_replay"])
def test_bfloat16_speculative_equals_plain_and_state_stays_true(
    bf16: tuple[LoadedCheckpoint, Path], plain_bf16: list[int], strategy: str
) -> None:
    session, spec = _run(bf16, drafter="draft-model", strategy=strategy, dtype="bfloat16")
    assert session.services.work[0].drafter.model.dtype == torch.bfloat16
    assert _answers(spec) == plain_bf16
    assert [e for e in spec.events if e.trigger is Trigger.REJECT]
    assert not [e for e in spec.events if e.trigger is Trigger.INVARIANT_VIOLATION]


def test_bfloat16_audit_still_catches_a_contaminated_state(
        bf16: tuple[LoadedCheckpoint, Path]) -> None:
    # bfloat16's audit tolerance is wider (its rounding is); a stray token still exceeds it.
    _, journal = _run(bf16, drafter="draft-model", strategy="none", dtype="bfloat16")
    violations = [e.payload["invariant"] for e in journal.events
                  if e.trigger is Trigger.INVARIANT_VIOLATION]
    assert "state_truth" in violations


def test_bfloat16_mtp_drafter_is_lossless(bf16: tuple[LoadedCheckpoint, Path],
                                          plain_bf16: list[int]) -> None:
    from engine.drafters.mtp import MtpDrafter
    from engine.hybrid.mtp import MtpHead

    ckpt = bf16[0]
    torch.manual_seed(5)
    head = MtpHead(ckpt.model).to(_device(ckpt), torch.bfloat16).eval().requires_grad_(False)
    config = RunConfig(backend="torch", turns=2, answer_tokens=10**6, max_answer_tokens=32,
                       draft_max=3, model=str(ckpt.path), drafter="ngram-simple",
                       strategy="checkpoint", dtype="bfloat16", device=_device(ckpt))
    journal = MemoryJournal()
    session = Session(config, journal, backend=TorchBackend(config, ckpt),
                      conversation=_Questions())
    session.services.work[0].drafter = MtpDrafter(head)
    session.run()
    assert _answers(journal) == plain_bf16
    assert [e for e in journal.events if e.trigger is Trigger.VERIFY]
    assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]


def test_shipped_wide_runs_in_bfloat16_with_a_true_state(torch_device: torch.device) -> None:
    # The model three engines run, in vLLM's dtype: MTP speculation answers what plain
    # decoding answers, and the state audit passes every commit (bf16 rounding moves a
    # true state by up to ~3e-2 from its one-token-at-a-time twin; a float32 tolerance
    # would call that contamination).
    config = RunConfig(backend="torch", model="shipped:wide", dtype="bfloat16", turns=1,
                       max_answer_tokens=24, draft_max=3, strategy="checkpoint",
                       device=torch_device.type)
    ckpt = load_checkpoint("shipped:wide", dtype=torch.bfloat16, device=torch_device)
    runs = {}
    for drafter in ("none", "mtp"):
        journal = MemoryJournal()
        session = Session(config.replace(drafter=drafter), journal,
                          backend=TorchBackend(config, ckpt), conversation=_Questions())
        session.run()
        assert not [e for e in journal.events if e.trigger is Trigger.INVARIANT_VIOLATION]
        runs[drafter] = _answers(journal)
    assert runs["mtp"] == runs["none"]
    # The head drafts with the loaded target's embedding and LM head: no second target.
    assert session.services.work[0].drafter.head.target is ckpt.model
