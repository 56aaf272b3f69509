"""Read the llama.cpp build matrix from its source distributions: for each pinned
llama-cpp-python version, the llama.cpp commit it vendors (the sdist carries that
submodule's shallow git history: its one commit, with date and subject), what its server
can do (speculative types, speculative checkpoints, chains, flag dialect), and which of the
known incidents (adapters/llama/builds/incidents.py) its source carries, fixed or not.

Writes adapters/llama/builds/builds.json (what specledger reads at run time) and the table in
docs/llama-builds.md. Nothing in either is typed by hand:

    python tools/llama_matrix.py [--sdists DIR]

The sdists are fetched with pip into DIR (default: a folder in the cache) when missing.
"""

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters.llama.builds.incidents import INCIDENTS, Incident, exposure
from adapters.llama.builds.matrix import FACTS_FILE, MATRIX, Dialect
from adapters.llama.server.options import Drafter, our_drafter
from adapters.llama.server.paths import cache_root

DOC = Path(__file__).resolve().parents[1] / "docs" / "llama-builds.md"
HISTORY_HEADING = "## Known incidents by upstream build"
"""Where the doc's part that tools/llama_history.py writes begins: this script keeps it."""
VENDOR = "vendor/llama.cpp/"
SUBMODULE_GIT = ".git/modules/vendor/llama.cpp"


@dataclass
class Sdist:
    """One llama-cpp-python source distribution, read in place."""

    version: str
    path: Path
    _texts: dict[str, str] = field(default_factory=dict)

    @property
    def prefix(self) -> str:
        """The folder every member of the sdist lies under."""
        return f"llama_cpp_python-{self.version}/"

    def text(self, rel: str) -> str:
        """A vendored llama.cpp file's text ('' when the build has no such file)."""
        if rel not in self._texts:
            with tarfile.open(self.path) as tar:
                try:
                    member = tar.extractfile(self.prefix + VENDOR + rel)
                except KeyError:
                    member = None
                self._texts[rel] = member.read().decode("utf-8", "replace") if member else ""
        return self._texts[rel]

    def commit(self) -> tuple[str, str, str]:
        """The vendored commit's hash, committer date and subject, from its git folder."""
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(self.path) as tar:
            members = [m for m in tar.getmembers()
                       if m.name.startswith(self.prefix + SUBMODULE_GIT + "/")]
            tar.extractall(tmp, members=members, filter="data")
            git_dir = Path(tmp) / self.prefix / SUBMODULE_GIT
            # The folder's config names a work tree that is not here: give it one.
            out = subprocess.run(["git", f"--git-dir={git_dir}", f"--work-tree={tmp}", "log",
                                  "-1", "--format=%H%n%cI%n%s"], capture_output=True,
                                 text=True, check=True, cwd=tmp).stdout.splitlines()
        return out[0], out[1], out[2]


def fetch(version: str, folder: Path) -> Path:
    """The sdist of `version` in `folder`, downloaded by pip when it is not there yet."""
    path = folder / f"llama_cpp_python-{version}.tar.gz"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        print(f"fetching llama-cpp-python=={version} (source distribution)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", f"llama-cpp-python=={version}", "-d",
                        str(folder)], check=True)
    return path


def drafters(text: Callable[[str], str]) -> list[str]:
    """Our drafters a source tree's server offers (read through `text(file)`): its
    --spec-type values, and a draft model."""
    names = set(re.findall(r'"(draft-mtp|ngram-simple|ngram-map-k|ngram-mod)"',
                           text("common/arg.cpp") + text("common/speculative.cpp")))
    offered = {Drafter(our_drafter(n)) for n in names} | {Drafter.DRAFT_MODEL}
    return [d.value for d in Drafter if d in offered]


def source_facts(text: Callable[[str], str]) -> dict[str, object]:
    """What a llama.cpp source tree, read through `text(file)`, says of its server
    (drafters, speculative checkpoints, chains, flag dialect) and of each known incident:
    the same reading for an sdist here and for a commit of llama.cpp's history
    (tools/llama_history.py)."""
    arg, server = text("common/arg.cpp"), text("tools/server/server-context.cpp")
    doc: dict[str, object] = {
        "spec_types": drafters(text),
        "spec_checkpoints": "speculative decoding will use checkpoints" in server,
        "chains": "comma-separated list of types of speculative decoding" in arg,
        "dialect": (Dialect.SPEC_DRAFT if '"--spec-draft-n-max"' in arg
                    else Dialect.LEGACY).value,
    }
    doc["exposures"] = {i.key: exposure(i, doc, text).value for i in INCIDENTS}
    return doc


def build_facts(src: Sdist) -> dict[str, object]:
    """Everything builds.json keeps of one build."""
    commit, date, subject = src.commit()
    return {"version": src.version, "commit": commit, "date": date, "subject": subject,
            **source_facts(src.text)}


def table(builds: list[dict[str, object]]) -> str:
    """docs/llama-builds.md."""
    lines = ["# The llama.cpp build matrix", "",
             "Generated by `python tools/llama_matrix.py` from the source distributions of "
             "llama-cpp-python: do not edit. Each build vendors one llama.cpp commit; "
             "`specledger llama build VERSION` builds its server into the cache.", "",
             "| build | llama.cpp commit | date | last change | drafters | speculative "
             "checkpoints | chains | flags |", "|---|---|---|---|---|---|---|---|"]
    for b in builds:
        lines.append(f"| {b['version']} | `{str(b['commit'])[:10]}` | {str(b['date'])[:10]} | "
                     f"{b['subject']} | {', '.join(b['spec_types'])} | "  # type: ignore[arg-type]
                     f"{'yes' if b['spec_checkpoints'] else 'no: refused on a hybrid model'} "
                     f"| {'yes' if b['chains'] else 'no'} | {b['dialect']} |")
    lines += ["", "## Known incidents in each build's source", "",
              "`bug`: the code the incident is about is there, unfixed; `fixed`: the fix is in "
              "the source; `absent`: the build cannot run the scenario (no such drafter or "
              "code path). What each build does when run is in docs/llama.md's incident table "
              "(`specledger bench incidents`).", "",
              "| incident | " + " | ".join(str(b["version"]) for b in builds) + " |",
              "|---|" + "---|" * len(builds)]
    for inc in INCIDENTS:
        cells = [b["exposures"][inc.key] for b in builds]  # type: ignore[index]
        lines.append(f"| {inc.key}: {inc.title} | " + " | ".join(cells) + " |")
    lines += ["", "How each cell is decided (the source signature the script checks):", ""]
    lines += [f"- {inc.key}: {describe(inc)}" for inc in INCIDENTS]
    return "\n".join(lines) + "\n"


def describe(inc: Incident) -> str:
    """One line on how the script decides an incident's cell."""
    fix = (f"fixed where `{inc.fix_code.pattern}` is in {inc.fix_code.file}"
           if inc.fix_code is not None else "no fix merged upstream")
    return "; ".join([f"needs {', '.join(inc.needs)}" if inc.needs else "any build",
                      f"bug where `{inc.bug_code.pattern}` is in {inc.bug_code.file}", fix])


def main(argv: list[str] | None = None) -> int:
    """Read every sdist of the matrix; write builds.json and the docs table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdists", type=Path, default=cache_root() / "sdists")
    args = parser.parse_args(argv)
    builds = [build_facts(Sdist(v, fetch(v, args.sdists))) for v in MATRIX]
    FACTS_FILE.write_text(json.dumps({"builds": builds}, indent=1) + "\n")
    kept = DOC.read_text() if DOC.is_file() else ""
    at = kept.find(HISTORY_HEADING)
    DOC.write_text(table(builds) + ("\n" + kept[at:] if at >= 0 else ""))
    print(f"wrote {FACTS_FILE} and {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
