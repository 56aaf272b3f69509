"""The device switch: resolved once, refused with an actionable message where it cannot
run, and recorded resolved with the session (as the kernel switch is)."""

from pathlib import Path

import pytest
import torch

from engine.config import RunConfig
from engine.errors import BackendError, ConfigError
from engine.hybrid.device import resolve_device, torch_dtype
from engine.shipped import ROOT as SHIPPED_ROOT
from eventlog import get_session, open_db
from specledger.api import run_session
from specledger.cli.main import main

MODELS = SHIPPED_ROOT


def test_auto_follows_what_torch_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    assert resolve_device("cpu") == torch.device("cpu")


def test_cuda_without_a_gpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendError, match="sees no CUDA device; use --device cpu"):
        resolve_device("cuda")
    with pytest.raises(ConfigError, match="device: 'gpu' is not one of auto, cpu, cuda"):
        RunConfig(device="gpu")


def test_dtype_names_a_torch_dtype_and_is_checked_at_the_edge() -> None:
    assert torch_dtype("float32") is torch.float32
    assert torch_dtype("bfloat16") is torch.bfloat16
    assert RunConfig(dtype="bfloat16").to_dict()["dtype"] == "bfloat16"
    with pytest.raises(ConfigError, match="dtype: 'float16' is not one of float32, bfloat16"):
        RunConfig(dtype="float16")
    with pytest.raises(BackendError, match="dtype: 'half' is not one of"):
        torch_dtype("half")


def test_the_session_records_the_device_that_ran(tmp_path: Path) -> None:
    config = RunConfig(backend="torch", model=str(MODELS / "target"), drafter="none",
                       turns=1, max_answer_tokens=4, audit=False, device="auto")
    db = str(tmp_path / "log.db")
    result = run_session(config, db)
    stored = get_session(open_db(db, create=False), result.session_id).config
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert stored["device"] == expected
    if expected == "cpu":  # the Triton kernels run on CUDA only (tests use the interpreter)
        assert stored["kernels"] == "torch"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_refuses_cuda_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    status = main(["run", "--backend", "torch", "--device", "cuda", "--turns", "1",
                   "--model", str(MODELS / "target"), "--db", str(tmp_path / "x.db")])
    assert status == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "use --device cpu" in err[0]
