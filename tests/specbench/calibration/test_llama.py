"""The llama calibration: its model charges what the sim charges, round by round; the
fit recovers known constants; the quick suite runs against llama-server and writes a
profile the sim loads by its path; `--backend` reaches the suite. (How long the suite
takes is a benchmark's business, not a test's.)"""

import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pytest

from adapters.llama.server.paths import require_converter, require_server
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.sim.backend import SimBackend
from engine.sim.costs import PROFILES, get_profile, load_profile_file
from specbench import BenchOptions, run_suite
from specbench.calibration.llama.fit import Row, decode_s, fit, nnls, predict
from specbench.calibration.llama.measure import Round, Trace
from specbench.calibration.llama.validate import sim_replay
from tests.adapters.llama.conftest import require_llama

# The shipped model's sizes under llama.cpp's placement, made-up rates.
TRUE = replace(PROFILES["tiny-cpu"], name="llama-test", peak_flops=1e18, launch_s=2e-3,
               token_s=4e-4, multi_token_s=1e-3, round_sync_s=3e-4, state_tensors=12,
               tensor_copy_s=4e-5,
               checkpoint_place="host", host_bw=2e10, copy_bw=2e10)
MTP_S = 1.5e-3


def _trace(prompt: int, rounds: list[tuple[int, int, int]]) -> Trace:
    """Rounds as (drafted, accepted, restores); contexts follow the committed tokens."""
    out, ctx = [], prompt
    for drafted, accepted, restores in rounds:
        out.append(Round(ctx=ctx, drafted=drafted, accepted=accepted,
                         checkpoint=drafted > 0,
                         replays=(accepted + 1,) * restores))
        ctx += accepted + 1
    return Trace(prompt_n=prompt, generated=1 + sum(a + 1 for _, a, _ in rounds),
                 rounds=tuple(out), ctx_checkpoints=1)


NGRAM = _trace(120, [(0, 0, 0), (8, 3, 1), (8, 8, 0), (0, 0, 0), (5, 1, 1), (8, 7, 1),
                     (0, 0, 0)])
MTP = _trace(90, [(8, 2, 0), (8, 8, 0), (8, 0, 0), (8, 5, 0)])
PLAIN = _trace(150, [(0, 0, 0)] * 9)


@pytest.mark.parametrize(("drafter", "trace"), [("ngram-mod", NGRAM), ("mtp", MTP),
                                                ("none", PLAIN)])
def test_the_model_charges_what_the_sim_charges(drafter: str, trace: Trace) -> None:
    """A sim session replaying the rounds under the profile takes the model's time."""
    sim = sim_replay(trace, drafter, TRUE, MTP_S, cap=200, draft_max=8)
    assert sim["generated"] == trace.generated
    assert sim["decode_s"] == pytest.approx(decode_s(TRUE, trace, drafter, MTP_S), rel=1e-9)


def test_host_checkpoints_make_ngram_rounds_slower_not_mtp_rounds() -> None:
    device = replace(TRUE, checkpoint_place="device")
    assert decode_s(TRUE, NGRAM, "ngram-mod") > decode_s(device, NGRAM, "ngram-mod")
    assert decode_s(TRUE, MTP, "mtp") == decode_s(device, MTP, "mtp")


def test_fit_recovers_known_constants() -> None:
    traces = [_trace(p, [(0, 0, 0), (8, a, int(a < 8)), (6, 2, 1), (0, 0, 0)] * n)
              for p, a, n in ((40, 3, 2), (300, 8, 3), (150, 1, 1), (600, 5, 4))]
    mtps = [_trace(p, [(8, a, 0)] * n) for p, a, n in ((80, 2, 3), (200, 6, 5), (400, 0, 2))]
    rows = [Row("prefill", "none", t, 0.0) for t in traces]
    rows += [Row("decode/ngram-mod", "ngram-mod", t, 0.0) for t in traces]
    rows += [Row("decode/none", "none", _trace(t.prompt_n, [(0, 0, 0)] * 7), 0.0)
             for t in traces]
    rows += [Row("decode/mtp", "mtp", t, 0.0) for t in mtps]
    rows = [replace(r, seconds=predict(TRUE, r, MTP_S)) for r in rows]
    base = replace(TRUE, launch_s=1.0, token_s=1.0, hbm_bw=1.0, round_sync_s=0.0)
    got, mtp = fit(rows, base)
    assert mtp == pytest.approx(MTP_S, rel=1e-4)
    for name in ("launch_s", "token_s", "multi_token_s", "round_sync_s", "tensor_copy_s"):
        assert getattr(got, name) == pytest.approx(getattr(TRUE, name), rel=1e-4), name


def test_nnls_keeps_coefficients_non_negative() -> None:
    a = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert nnls(a, np.array([2.0, -1.0, 1.0])) == pytest.approx([1.5, 0.0])


def test_backend_option_is_checked() -> None:
    with pytest.raises(ConfigError, match="backend: 'vllm' is not torch or llama"):
        BenchOptions(backend="vllm")


def test_quick_llama_calibration(tmp_path: Path) -> None:
    require_llama(require_server)
    require_llama(require_converter)
    opts = BenchOptions(out=tmp_path, db=str(tmp_path / "b.db"), quick=True, backend="llama")
    result = run_suite("calibration", opts)
    folder = tmp_path / "calibration_llama"
    data = json.loads((folder / "results.json").read_text())
    assert data["quick"] is True and result.name == "calibration_llama"
    path = folder / "llama-tiny-cpu-measured.json"
    profile = load_profile_file(path)
    assert profile.checkpoint_place == "host" and profile.forward_s(1, 0) > 0
    # the results say what the file holds (JSON lists for its tuples)
    assert data["constants"] == json.loads(json.dumps(asdict(profile)))
    # the sim runs on it by its path, as `specledger run --profile PATH` does
    assert get_profile(str(path)) == profile
    assert SimBackend(RunConfig(profile=str(path))).costs == profile
    for errors in (data["calibration"]["fit_error"], data["calibration"]["held_out_error"]):
        numbers = _numbers(errors)
        assert numbers and all(math.isfinite(e) for e in numbers)
    validation = {v["drafter"]: v for v in data["calibration"]["validation"]}
    assert set(validation) == {"none", "mtp", "ngram-mod"}
    for v in validation.values():  # the sim replays llama-server's rounds token for token
        assert v["sim_generated"] == v["generated"] and v["measured_tok_s"] > 0
    assert validation["mtp"]["sim_drafted"] == validation["mtp"]["drafted"]
    assert data["calibration"]["reprefill"]["exact"] is True
    assert all(load >= 0 for load in data["calibration"]["load_average"])
    assert (folder / "llama_fit.png").stat().st_size > 0
    logs = json.loads((folder / "logs.json").read_text())
    part = logs["builds"]["0.3.36"]  # quick: the default build alone
    assert {r["setting"] for r in part["rows"]} >= {"none", "ngram-mod k=8", "mtp k=4"}
    # a fit predicts its own log as measured (its stalls charged back as its level): the
    # fit is checked on synthetic logs (tests/adapters/llama/calibration/test_fit.py), committed
    # ones (test_logfit_heldout.py) and fixed ones (tests/specledger/cli/test_calibrate.py)
    for r in part["rows"]:
        for name in part["fits"]:
            assert r[name]["predicted"] > 0
            if r[name]["fitted_on_it"]:  # quick: one run, the fit log (print_timing's
                assert abs(r[name]["error"]) <= 0.03  # span is its rounds' within lines)
            else:
                assert isinstance(r[name]["outside"], list)
    assert len(result.goals) == 2


def _numbers(value: object) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in _numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in _numbers(v)]
    return [float(value)] if isinstance(value, int | float) else []


def test_public_profiles_predict_the_checkpoint_cost() -> None:
    from specbench.calibration.llama.profiles import NAMES, predictions, report, table

    for name in NAMES:
        p = predictions(get_profile(name))
        assert p["host_tok_s"] < p["device_tok_s"] < p["rollback_tok_s"]
        assert p["plain_tok_s"] < p["rollback_tok_s"]
    # published: MTP with host checkpoints at 0.19x of plain on Strix Halo (#28120)
    strix = predictions(get_profile("strix-halo-qwen3-next-80b-q4-llama"))
    assert strix["host_tok_s"] < 0.3 * strix["plain_tok_s"]
    assert table().count("\n") == len(NAMES) + 1
    assert "held out" in report() and "unknown" in report()


def test_cli_backend_is_a_choice(capsys: pytest.CaptureFixture[str]) -> None:
    from specledger.cli.main import main

    with pytest.raises(SystemExit):
        main(["bench", "calibration", "--backend", "vllm"])
    assert "invalid choice: 'vllm'" in capsys.readouterr().err
