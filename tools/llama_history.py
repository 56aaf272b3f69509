"""Read llama.cpp's own history for the builds of the known incidents: upstream's build
number of every commit of master, and for each incident of adapters/llama/builds/incidents.py
the first build whose source carries its bug and the first whose source no longer does.

llama.cpp numbers a build by the commits of master it holds (`git rev-list --count`;
master is squash-merged, so one number per commit): the release tag bN names the commit
whose count is N. This reads a clone of master (any repository whose history holds
upstream's master up to `--tip`, with no commit of its own in between), checks every
commit of master that changes a file the signatures read, with the very reading
tools/llama_matrix.py gives an sdist, and writes:

- adapters/llama/builds/upstream_builds.txt: the commit of every build number up to the tip;
- adapters/llama/builds/incident_builds.json: each incident's first bug build and first fixed
  build, with commit, date and subject; the tip; the anchors past it (ANCHORS: a build
  number and commit that public files state, each with its source);
- docs/llama-builds.md's last section, the same as a table.

    python tools/llama_history.py --git DIR --tip COMMIT --origin OWNER/NAME
"""

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.llama.builds.history import HISTORY_FILE, TABLE_FILE, TABLE_HASH
from adapters.llama.builds.incidents import INCIDENTS
from adapters.llama.builds.matrix import Exposure, matrix
from tools.llama_matrix import DOC, HISTORY_HEADING, source_facts

FILES = ("common/arg.cpp", "common/speculative.cpp", "tools/server/server-context.cpp")
"""Every file the source reading looks at (tools/llama_matrix.py's source_facts)."""

ANCHORS: tuple[dict[str, Any], ...] = (
    {"build": 10078, "commit": "f04801018",
     "source": "a public llama-bench note in the search index (file id 68931722587): "
               "'llama-bench build f04801018/10078'; llama.cpp #27527's b10078"},
    {"build": 10103, "commit": "c588c4f47683e73ad2d69f50480bec6cc85fd0f7",
     "source": "a public build fingerprint in the search index (file id 59545618558): "
               "'llama.cpp b10103 at c588c4f47683e73ad2d69f50480bec6cc85fd0f7'"},
    {"build": 10566, "commit": "bb4caa7540188872173c44d161602d9271386413",
     "date": "2026-08-21",
     "source": "temper-sh/temper's catalog test (search index file id 58255820773): "
               "recipe llama-cpp b10566 at bb4caa7540188872173c44d161602d9271386413; "
               "'ggml-org/llama.cpp commit bb4caa754 (llama.cpp 0.2.0, 2026-08-21)' in a "
               "public changelog (file id 63254685328); llama.cpp #27527 names "
               "'b10566 (bb4caa754)'"},
    {"build": 11312, "commit": "0c1e57098bba43ac29e6e3b677cdceebdd22334f",
     "date": "2026-10-01",
     "source": "public notes in the search index: 'llama.cpp b11312, commit "
               "0c1e57098bba43ac29e6e3b677cdceebdd22334f' (file id 70293650681), 'Image "
               "build 11312 / commit 0c1e57098 is dated 2026-10-01' (file id 70086777948); "
               "the commit llama-cpp-python 0.3.36 vendors (builds.json)"},
)
"""Build numbers with their commits as public files state them: those inside the history
check its numbering, those past its tip place a banner the history cannot."""


def git(repo: Path, *args: str) -> str:
    """A git command's output in the bare repository `repo`."""
    return subprocess.run(["git", f"--git-dir={repo}", *args], capture_output=True,
                          text=True, check=True).stdout


@dataclass(frozen=True)
class Commit:
    """One commit of master with its build number."""

    build: int
    sha: str
    date: str
    subject: str

    def to_dict(self) -> dict[str, Any]:
        """The json form."""
        return {"build": self.build, "commit": self.sha, "date": self.date,
                "subject": self.subject}


def master(repo: Path, tip: str) -> list[Commit]:
    """Master's commits up to `tip`, oldest first, each with its build number: one more
    than its parent's, or for a merge (one, in 2024) the count of what it brings."""
    if git(repo, "rev-parse", "--is-shallow-repository").strip() != "false":
        raise SystemExit(f"{repo} is a shallow clone: its counts are not build numbers")
    out, count = [], 0
    for line in git(repo, "log", "--first-parent", "--reverse", "--format=%H %P%x09%cI%x09%s",
                    tip).splitlines():
        head, date, subject = line.split("\t", 2)
        sha, *parents = head.split()
        count += 1 if len(parents) < 2 else int(
            git(repo, "rev-list", "--count", sha, f"^{parents[0]}"))
        out.append(Commit(count, sha, date, subject))
    if count != int(git(repo, "rev-list", "--count", tip)):
        raise SystemExit("the first-parent walk does not count what rev-list counts")
    return out


class Reader:
    """Files of any commit, through one `git cat-file --batch`."""

    def __init__(self, repo: Path) -> None:
        self.proc = subprocess.Popen(["git", f"--git-dir={repo}", "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def text(self, sha: str, path: str) -> str:
        """The file's text at `sha` ('' where the commit has no such file)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{sha}:{path}\n".encode())
        self.proc.stdin.flush()
        header = self.proc.stdout.readline().split()
        if header[-1] == b"missing":
            return ""
        body = self.proc.stdout.read(int(header[2]) + 1)[:-1]
        return body.decode("utf-8", "replace")


def exposures(repo: Path, commits: list[Commit]) -> list[tuple[Commit, dict[str, Exposure]]]:
    """What the source of each commit that changes a read file says of every incident
    (the commits between two of them read the same)."""
    changed = set(git(repo, "log", "--first-parent", "--format=%H", commits[-1].sha, "--",
                      *FILES).split())
    reader, out = Reader(repo), []
    for c in commits:
        if c.sha in changed:
            doc = source_facts(lambda rel, sha=c.sha: reader.text(sha, rel))
            out.append((c, {k: Exposure(v) for k, v in doc["exposures"].items()}))
    return out


def span(key: str, seen: list[tuple[Commit, dict[str, Exposure]]]) -> dict[str, Any]:
    """One incident's first bug build and first build after it whose source no longer
    carries the bug (its fix's code in, or the bug's code gone), from the readings."""
    changes = [(c, e[key]) for i, (c, e) in enumerate(seen)
               if i == 0 or e[key] is not seen[i - 1][1][key]]
    bugs = [i for i, (_, e) in enumerate(changes) if e is Exposure.BUG]
    if not bugs:
        raise SystemExit(f"{key}: no commit of master carries the bug")
    if len(bugs) > 1:  # a span from one first build to one fix is all the data says
        raise SystemExit(f"{key}: the bug comes and goes: "
                         f"{[(c.build, e.value) for c, e in changes]}")
    first = changes[bugs[0]][0]
    after = changes[bugs[-1] + 1] if bugs[-1] + 1 < len(changes) else None
    doc: dict[str, Any] = {"bug": first.to_dict(), "fix": None}
    if after is not None:
        doc["fix"] = {**after[0].to_dict(), "how": "the fix's code is in"
                      if after[1] is Exposure.FIXED else "the bug's code is gone"}
    return doc


def checks(commits: list[Commit]) -> list[dict[str, Any]]:
    """The anchors, each checked against the history where it reaches them."""
    by_build = {c.build: c for c in commits}
    out = []
    for anchor in ANCHORS:
        held = by_build.get(anchor["build"])
        if held is not None and not held.sha.startswith(anchor["commit"]):
            raise SystemExit(f"anchor b{anchor['build']} {anchor['commit']} is {held.sha} "
                             "in this history: its numbering is not upstream's")
        out.append({**anchor, "in_history": held is not None})
    return out


def open_through(doc: dict[str, Any], key: str, tip: Commit,
                 anchors: list[dict[str, Any]]) -> dict[str, Any] | None:
    """For an incident unfixed at the tip, the latest build known to carry its bug: a
    matrix build past the tip whose source says so (an anchor names its number)."""
    if doc["fix"] is not None:
        return None
    latest = {"build": tip.build, "commit": tip.sha, "source": "the history's tip"}
    for anchor in anchors:
        build = next((b for b in matrix() if b.commit == anchor["commit"]), None)
        if build is None or anchor["build"] <= latest["build"]:
            continue
        if build.exposures[key] is not Exposure.BUG:
            raise SystemExit(f"{key}: fixed between b{tip.build} and b{anchor['build']} "
                             f"({build.version}): extend the history past the fix")
        latest = {"build": anchor["build"], "commit": anchor["commit"],
                  "source": f"llama-cpp-python {build.version}'s source, builds.json"}
    return latest


def mark(doc: dict[str, Any]) -> str:
    """`b8983 (80afa33aa, 2026-04-30: spec : fix draft model checkpoints (#22521))`."""
    said = ", ".join(x for x in (doc.get("date", "")[:10], doc.get("subject")) if x)
    return f"b{doc['build']} (`{doc['commit'][:9]}`{', ' + said if said else ''})"


def section(history: dict[str, Any]) -> str:
    """docs/llama-builds.md's part: each incident's builds, and the anchors."""
    tip = history["history"]["tip"]
    lines = [HISTORY_HEADING, "",
             f"Generated by `python tools/llama_history.py` from llama.cpp's master up to "
             f"{mark(tip)}, as {history['history']['origin']} holds it (not shallow): do not "
             "edit. A build's number is the count of master's commits it holds; each cell "
             "is the first build of master whose source the signatures above read so. An "
             "upstream build N is exposed to an incident where its bug's first build <= N "
             "< its fix's first build, fixed from the fix's on, absent before the bug's; "
             "for an incident with no fix, exposed up to the newest build known to carry "
             "it and unknown past it.", "",
             "| incident | bug from | fixed in | how the fix shows |", "|---|---|---|---|"]
    for inc in INCIDENTS:
        doc = history["incidents"][inc.key]
        fix, later = doc["fix"], doc["open_through"]
        fixed = mark(fix) if fix else (f"no fix merged through b{later['build']} "
                                       f"({later['source']})")
        lines.append(f"| {inc.key}: {inc.title} | {mark(doc['bug'])} | {fixed} | "
                     f"{fix['how'] if fix else '-'} |")
    lines += ["", "Build numbers with their commits as public files state them: those in the "
              "history check its numbering, those past it place a banner by its commit.", "",
              "| build | commit | in the history | source |", "|---|---|---|---|"]
    lines += [f"| b{a['build']} | `{a['commit'][:9]}` | {'yes' if a['in_history'] else 'no'} "
              f"| {a['source']} |" for a in history["anchors"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Read the history; write the build table and the incidents' builds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git", type=Path, required=True, help="a bare or .git folder")
    parser.add_argument("--tip", required=True, help="upstream master's newest commit held")
    parser.add_argument("--origin", required=True, help="the repository the clone is of")
    args = parser.parse_args(argv)
    commits = master(args.git, args.tip)
    tip = commits[-1]
    seen = exposures(args.git, commits)
    anchors = checks(commits)
    incidents = {}
    for inc in INCIDENTS:
        doc = span(inc.key, seen)
        doc["open_through"] = open_through(doc, inc.key, tip, anchors)
        incidents[inc.key] = doc
    slots = ["-"] * tip.build  # a number no commit of master has (a merged side commit's)
    for c in commits:
        slots[c.build - 1] = c.sha[:TABLE_HASH]
    TABLE_FILE.write_text(
        f"# upstream llama.cpp: the commit of each build number, b1 first ({TABLE_HASH} hex "
        f"digits; '-': no commit of master has it)\n# written by tools/llama_history.py "
        f"from {args.origin}, whose history holds master up to {tip.sha} (b{tip.build})\n"
        + "".join(f"{s}\n" for s in slots))
    history = {"history": {"origin": args.origin, "shallow": False, "tip": tip.to_dict(),
                           "table": TABLE_FILE.name},
               "anchors": anchors, "incidents": incidents}
    HISTORY_FILE.write_text(json.dumps(history, indent=1) + "\n")
    text = DOC.read_text()
    at = text.find(HISTORY_HEADING)
    DOC.write_text((text[:at] if at >= 0 else text + "\n") + section(history))
    print(f"wrote {TABLE_FILE}, {HISTORY_FILE} and {DOC} (b1..b{tip.build}, "
          f"{len(seen)} readings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
