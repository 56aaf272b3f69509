"""Known incidents by build, for any banner: a matrix build by its own source; an upstream
build by its number against each incident's first bug and fixed builds (the data
tools/llama_history.py read from llama.cpp's history); a fork, a pull request's branch,
ik_llama.cpp or no banner: unknown, saying why. The banners are those of the real logs
users published (../shared/real-logs/llama-server/README.md)."""

import pytest

from adapters.llama.builds.exposed import BuildExposure, build_exposure
from adapters.llama.builds.history import Verdict, upstream
from adapters.llama.builds.incidents import INCIDENTS
from adapters.llama.builds.matrix import Exposure, matrix
from adapters.llama.builds.placement import Basis

EXPOSED, FIXED, ABSENT, UNKNOWN = Verdict.EXPOSED, Verdict.FIXED, Verdict.ABSENT, Verdict.UNKNOWN
KEYS = tuple(i.key for i in INCIDENTS)


def judge(banner: str | None, structured_log: bool = False) -> BuildExposure:
    """The exposure of a llama.cpp session whose config holds `banner`."""
    exposure = build_exposure({"engine": "llama.cpp", "build": banner,
                               "structured_log": structured_log})
    assert exposure is not None
    return exposure


def verdicts(exposure: BuildExposure) -> dict[str, Verdict]:
    """Each incident's verdict by its key."""
    return {j.incident.key: j.verdict for j in exposure.judged}


def upstream_banner(build: int) -> str:
    """The banner upstream's build `build` prints (its commit from the history held)."""
    commit = upstream().commit_at(build)
    assert commit is not None
    return f"build: {build} ({commit}) with GNU 15.2.1 for Linux x86_64"


def test_every_number_of_the_data_carries_its_commit() -> None:
    history = upstream()
    assert set(history.spans) == set(KEYS)
    for span in history.spans.values():
        marks = [span.bug, *([span.fix] if span.fix else [span.open_through])]
        for mark in marks:
            assert mark is not None and len(mark.commit) == 40
            assert mark.subject or mark.source
        if span.fix is None:  # an open incident: its newest build known to carry it
            assert span.open_through is not None and span.open_through.build >= history.tip.build
    for mark in (history.spans["PR 22521"].fix, history.spans["PR 26320"].fix):
        assert mark is not None and mark.subject is not None
    # The fix PRs the incidents are named by are the commits the history found.
    assert "(#22521)" in history.spans["PR 22521"].fix.subject  # type: ignore[union-attr]
    assert "(#26320)" in history.spans["PR 26320"].fix.subject  # type: ignore[union-attr]
    assert "(#24411)" in history.spans["#24055"].fix.subject  # type: ignore[union-attr]
    assert "(#19493)" in history.spans["#28049"].bug.subject  # type: ignore[operator]


def test_the_number_agrees_with_each_matrix_builds_source() -> None:
    """The spans, read from the history, say of each matrix build what its sdist's source
    says (builds.json), once the build is placed by its commit."""
    numbers = {}
    for build in matrix():
        exposure = judge(f"build 1 ({build.short}) with GNU 12.2.0 for Linux x86_64")
        assert exposure.placement.basis is Basis.MATRIX and exposure.placement.matrix == build
        numbers[build.version] = exposure.placement.build
        assert exposure.placement.build is not None
        said = {Exposure.BUG: EXPOSED, Exposure.FIXED: FIXED, Exposure.ABSENT: ABSENT}
        for key, span in upstream().spans.items():
            assert span.at(exposure.placement.build) is said[build.exposures[key]], (
                build.version, key)
    assert numbers == {"0.3.20": 8643, "0.3.21": 8942, "0.3.24": 9445, "0.3.30": 9665,
                       "0.3.36": 11312}


@pytest.mark.parametrize(("build", "incident", "verdict"), [
    (8841, "PR 22521", ABSENT), (8842, "PR 22521", EXPOSED),  # speculative checkpoints
    (8982, "PR 22521", EXPOSED), (8983, "PR 22521", FIXED),   # the fix's own commit
    (10209, "PR 26320", EXPOSED), (10210, "PR 26320", FIXED),
    (9309, "#24055", ABSENT), (9310, "#24055", EXPOSED),
    (9592, "#24055", EXPOSED), (9593, "#24055", FIXED),
    (10470, "#28049", EXPOSED),                                # the history's tip
])
def test_an_upstream_build_at_each_edge(build: int, incident: str, verdict: Verdict) -> None:
    exposure = judge(upstream_banner(build))
    assert exposure.placement.basis is Basis.COMMIT and exposure.placement.build == build
    assert verdicts(exposure)[incident] is verdict


def test_past_the_history_the_number_decides_up_to_the_newest_build_checked() -> None:
    newest = upstream().spans["#28049"].open_through
    assert newest is not None and newest.build == 11312  # 0.3.36's source
    at, past = judge("build 11312 (123456789)"), judge("build 11313 (123456789)")
    assert at.placement.basis is past.placement.basis is Basis.NUMBER
    assert verdicts(at)["#28049"] is EXPOSED and verdicts(past)["#28049"] is UNKNOWN
    assert verdicts(past)["PR 26320"] is FIXED  # a fix stays in
    assert "its commit 123456789 is not checked" in past.head()
    assert "exposed to 0 known incident(s), 3 unknown" in past.head()


def test_the_commit_decides_where_the_number_disagrees() -> None:
    commit = upstream().commit_at(8983)
    exposure = judge(f"build 5 ({commit})")
    assert exposure.placement.build == 8983 and "(the banner says 5)" in exposure.head()
    assert verdicts(exposure)["PR 22521"] is FIXED


def test_the_real_logs_upstream_builds() -> None:
    """b10566 (bb4caa754, #27527's description) is placed by its commit through an anchor
    past the history; b10078 (the same thread's comment) by the history."""
    spans = upstream().spans
    for build, banner in ((10566, "build: 10566 (bb4caa754) with GNU 14.2.0 for Linux x86_64"),
                          (10078, upstream_banner(10078))):
        exposure = judge(banner)
        assert exposure.placement.basis is Basis.COMMIT and exposure.placement.build == build
        assert verdicts(exposure) == {k: spans[k].at(build) for k in KEYS}
    assert verdicts(judge("build 10566 (bb4caa754)")) == {
        "#28049": EXPOSED, "PR 22521": FIXED, "PR 26320": FIXED, "#23268": EXPOSED,
        "#28060": EXPOSED, "#24055": FIXED}
    assert verdicts(judge(upstream_banner(10078)))["PR 26320"] is EXPOSED
    assert upstream().commit_at(10078) == "f04801018"  # a public llama-bench note's
    # The banner issue 39 quotes is upstream's b10450 by the history's own numbering.
    quoted = judge("build: 10450 (ece963f41) with GNU 15.2.1 for Linux x86_64")
    assert quoted.placement.basis is Basis.COMMIT and quoted.placement.build == 10450


@pytest.mark.parametrize(("banner", "structured_log", "why"), [
    # PR branches: their number counts the branch's commits, their commit is none of master's
    ("build 9219 (49b42c9c3) with GNU 13.3.0 for Linux x86_64", False,
     "not upstream llama.cpp's b9219 (45b455e66)"),
    ("build: 7966 (96045552c) with GNU 15.2.1 for Linux x86_64", False,
     "not upstream llama.cpp's b7966 (8872ad212)"),
    # havenoammo's fork, as the reader stores it and as the log prints it
    ("build 484 (2c4055912)", False, "not upstream llama.cpp's b484 (cc0bb7235)"),
    ("build_info: b484-2c4055912", False, "a fork, a pull request's branch or a local build"),
    # ik_llama.cpp: by its words, by its structured log, or by its commit
    ("version: 4763 (9992f6b5)", False, "ik_llama.cpp's build"),
    ("build 4763 (9992f6b5)", True, "ik_llama.cpp's build"),
    ("build 4763 (9992f6b5)", False, "not upstream llama.cpp's b4763"),
    (None, False, "no banner in the log"),
])
def test_a_build_no_upstream_history_places_is_unknown(banner: str | None,
                                                       structured_log: bool, why: str) -> None:
    exposure = judge(banner, structured_log)
    assert exposure.placement.basis is Basis.NONE and exposure.placement.build is None
    assert set(verdicts(exposure).values()) == {UNKNOWN} and exposure.incidents == ()
    assert why in exposure.head() and "its known incidents are unknown" in exposure.head()
    # Each incident still says where upstream has its bug and fix, to compare by hand.
    assert "  #24055 context checkpoints invalidated on hybrid models: re-prefill: unknown " \
           "(upstream: bug from b9310, fixed in b9593)" in exposure.lines()
    assert exposure.to_dict()["verdicts"][0] == {
        "key": "#28049", "verdict": "unknown", "bug_build": 8842,
        "bug_commit": upstream().spans["#28049"].bug.commit, "fix_build": None,
        "fix_commit": None, "open_through": 11312}
