"""The incidents suite in quick mode: the default build, the PR 26320 scenario at smoke size,
recorded and judged (clean: 0.3.36 has the fix), the table with every incident and the
cells it left out, incidents.md, the goal, and the recorded sessions."""

from pathlib import Path

from adapters.llama.builds.incidents import INCIDENTS
from adapters.llama.server.paths import DEFAULT_BUILD
from eventlog import list_sessions, open_db
from tests.specbench.llama_quick import run_quick


def test_quick_run(tmp_path: Path) -> None:
    result, data = run_quick("incidents", tmp_path)
    assert data["quick"] is True and data["builds"] == [DEFAULT_BUILD]
    cells = data["cells"][DEFAULT_BUILD]
    assert set(cells) == {i.key for i in INCIDENTS}
    measured = cells.pop("PR 26320")
    assert measured["verdict"] == "clean" and measured["as_expected"] is True
    assert all(c["verdict"] == "not run (--quick)" for c in cells.values())
    recorded = {s.id for s in list_sessions(open_db(str(tmp_path / "b.db"), create=False))}
    assert set(measured["sessions"]) == set(result.sessions) == recorded and len(recorded) == 1
    md = (tmp_path / "incidents" / "incidents.md").read_text()
    for incident in INCIDENTS:
        assert f"| {incident.key}: {incident.title} |" in md
    assert f"clean (s{result.sessions[0]})" in md
    [goal] = result.goals
    assert goal.command == "specledger bench incidents"
    assert goal.measured == "0 (none); 1/1 measured cells as the builds' source says"
