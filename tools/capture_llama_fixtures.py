"""Capture the per-build llama-server fixtures of tests/adapters/llama/fixtures/builds/.

For each build given (default: every build of the matrix that is built), run a small fixed
set of scenarios through specledger's own llama backend (the code path of `specledger run
--backend llama --llama-build VERSION`: the shipped models' GGUF files as it serves them,
`server_args` in the build's flag dialect, the held-out conversation of seed 0 asked with
the `openai` client) and write, per scenario NAME:

    <out>/<VERSION>/<NAME>.log.gz          the server's stdout+stderr, gzip, unchanged
    <out>/<VERSION>/<NAME>.responses.json  the answers the client got, in request order
    <out>/<VERSION>/<NAME>.prompts.json    each request's prompt ids, as the server
                                           tokenized them (what a recorded run stores)

and a README.md per build saying how each file was made, and which scenarios the build
cannot run (and why). Nothing in these files is typed by hand.

A scenario the server refuses to start is listed in the README with the server's error.

    .venv/bin/python tools/capture_llama_fixtures.py [--build 0.3.21 ...] [--only NAME ...]
"""

import argparse
import gzip
import json
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.llama.builds.matrix import MATRIX, facts  # noqa: E402
from adapters.llama.errors import ModelRefusedError  # noqa: E402
from adapters.llama.gguf.export import model_gguf  # noqa: E402
from adapters.llama.server.conversation import converse  # noqa: E402
from adapters.llama.server.options import server_args  # noqa: E402
from adapters.llama.server.paths import built  # noqa: E402
from adapters.llama.server.process import LlamaServer, log_lines  # noqa: E402
from adapters.protocol import Messages, Sampling  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from specledger.runs.llama import questions, server_options, server_version  # noqa: E402

OUT = ROOT / "tests" / "adapters" / "llama" / "fixtures" / "builds"


class Refused(Exception):
    """The build's server would not start with a scenario's models (its error lines)."""


@dataclass(frozen=True)
class Scenario:
    """One fixture: the drafter chain (our names; `none`), its draft length, the answer
    cap, whether the server runs with -v, what it shows, and whether the draft model is
    the target itself (`draft_self`: a hybrid draft model every build loads)."""

    name: str
    drafter: str
    draft_max: int
    max_tokens: int
    verbose: bool
    shows: str
    draft_self: bool = False


SCENARIOS = (
    Scenario("plain", "none", 4, 24, True, "no drafter: prompt phase, plain steps, timings"),
    Scenario("ngram-mod", "ngram-mod", 8, 48, True,
             "speculative checkpoints, restores and replays (partial acceptances)"),
    Scenario("draft-model", "draft-model", 4, 32, True,
             "the draft model (-md); before 0.3.24 its own checkpoint lines"),
    Scenario("draft-self", "draft-model", 4, 32, True,
             "the target as its own draft model (hybrid: the draft context checkpoints its "
             "state; before 0.3.24 it deletes that checkpoint at each request)",
             draft_self=True),
    Scenario("mtp", "mtp", 4, 24, True, "draft-mtp: per-sequence recurrent states"),
    Scenario("chain", "ngram-mod,mtp", 4, 32, True, "the chain ngram-mod then draft-mtp"),
    Scenario("quiet", "ngram-mod", 8, 24, False, "without -v: the turn totals only"),
)


def unavailable(scenario: Scenario, version: str) -> str | None:
    """Why `version` cannot run `scenario` (None: it can)."""
    build = facts(version)
    if build is None:
        return None
    names = scenario.drafter.split(",")
    if "mtp" in names and "mtp" not in build.spec_types:
        return "no draft-mtp in this build (it came in 0.3.24)"
    if len(names) > 1 and not build.chains:
        return "no drafter chains in this build (they came in 0.3.24)"
    return None


def capture(scenario: Scenario, version: str, out: Path) -> dict[str, Any]:
    """Run one scenario on one build; write its files; return its README row."""
    config = RunConfig(backend="llama", drafter=scenario.drafter, turns=2,
                       max_answer_tokens=scenario.max_tokens, draft_max=scenario.draft_max,
                       seed=0, llama_build=version)
    if scenario.draft_self:
        config = replace(config, draft_model=str(model_gguf(config.model, build=version)))
    opts = replace(server_options(config), verbose=scenario.verbose)
    asked = questions(config)
    sampling = Sampling(config.temperature, config.top_k, config.top_p, config.seed,
                        config.answer_cap)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        try:
            server = LlamaServer(opts, log_path=log).__enter__()
        except ModelRefusedError:
            errors = [ln for ln in log_lines(log.read_text(errors="replace"))
                      if "error" in ln.lower()]
            raise Refused("; ".join(dict.fromkeys(errors[:3]))) from None
        with server:
            from openai import OpenAI

            client = OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1",
                            api_key="specledger", max_retries=0)

            def prompt_ids(messages: Messages) -> list[int]:
                text = server.client.apply_template(messages)
                return server.client.tokenize([text])[0]

            exchanges = converse(client, asked, sampling, stream=False, prompt_ids=prompt_ids)
            flags = server_args(opts, server.port, server.dialect)
        data = log.read_bytes()
    out.mkdir(parents=True, exist_ok=True)
    log_gz = out / f"{scenario.name}.log.gz"
    log_gz.write_bytes(gzip.compress(data, mtime=0))
    (out / f"{scenario.name}.responses.json").write_text(
        json.dumps([e.response for e in exchanges], indent=1) + "\n")
    (out / f"{scenario.name}.prompts.json").write_text(
        json.dumps([e.prompt_ids for e in exchanges]) + "\n")
    shown = [Path(f).name if f.endswith(".gguf") else f for f in flags]
    shown[shown.index("--port") + 1] = "PORT"  # the free port the server chose
    return {"name": scenario.name, "drafter": scenario.drafter, "draft_max": scenario.draft_max,
            "max_tokens": scenario.max_tokens, "verbose": scenario.verbose,
            "shows": scenario.shows, "flags": " ".join(shown), "log_bytes": len(data),
            "gz_bytes": log_gz.stat().st_size}


def readme(version: str, rows: list[dict[str, Any]], skipped: dict[str, str]) -> str:
    """The build folder's README: how each file was made."""
    build = facts(version)
    label = build.label() if build is not None else version
    lines = [
        f"# llama-server {label}: captured fixtures", "",
        f"Made by `tools/capture_llama_fixtures.py --build {version}` (do not edit): "
        "each scenario ran through specledger's llama backend (the code path of "
        f"`specledger run --backend llama --llama-build {version} --drafter D --turns 2 "
        "--max-answer-tokens N --draft-max K`, seed 0, temperature 0, one slot), on the "
        "shipped models' f32 GGUF files as that command serves them "
        "(adapters/llama/gguf/export.py `model_gguf`: the default build's export, without "
        "the MTP head for a build that has no draft-mtp).", "",
        f"Server: `{server_version(version)}`.", "",
        "`NAME.log.gz` is the server's stdout+stderr, gzip, unchanged; `NAME.responses.json` "
        "the answers the client got (request order); `NAME.prompts.json` each request's "
        "prompt ids as the server tokenized them; `capture.json` the rows of this README "
        "(the script rewrites it from them).", "",
        "| file | drafter | draft max | max tokens | -v | log bytes | gzip bytes | shows |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| `{r['name']}` | `{r['drafter']}` | {r['draft_max']} | "
                     f"{r['max_tokens']} | {'yes' if r['verbose'] else 'no'} | "
                     f"{r['log_bytes']} | {r['gz_bytes']} | {r['shows']} |")
    if build is not None and not build.spec_checkpoints:
        lines += ["", "This build has no speculative checkpoints, so its server refuses "
                  "speculation on the hybrid target whatever drafter is asked (`speculative "
                  "decoding not supported by this context`): the drafter scenarios show that "
                  "refusal and plain decoding, not what their `shows` column says."]
    lines += ["", "Flags (`server_args`; model paths shortened to the file name, the port the "
              "server chose shown as PORT):", ""]
    lines += [f"- `{r['name']}`: `{r['flags']}`" for r in rows]
    if skipped:
        lines += ["", "Not captured on this build:", ""]
        lines += [f"- `{name}`: {why}" for name, why in skipped.items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Capture the fixtures of the builds asked for."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="append", default=None,
                   help="a llama-cpp-python version (repeatable; default: every built one)")
    p.add_argument("--only", action="append", default=None,
                   help="scenario names to (re)capture (the README lists the others as "
                        "they are on disk)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    versions = args.build or [v for v in MATRIX if built(v)]
    for version in versions:
        out = args.out / version
        meta_path = out / "capture.json"
        meta: dict[str, Any] = json.loads(meta_path.read_text()) if meta_path.is_file() \
            else {"rows": {}, "skipped": {}}
        for scenario in SCENARIOS:
            if args.only and scenario.name not in args.only:
                continue
            why = unavailable(scenario, version)
            if why is None:
                print(f"{version} {scenario.name} ...", flush=True)
                try:
                    meta["rows"][scenario.name] = capture(scenario, version, out)
                    meta["skipped"].pop(scenario.name, None)
                    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
                except Refused as exc:  # what the build cannot load is a result too
                    why = f"the server refused to start: {exc}"
            if why is not None:
                meta["skipped"][scenario.name] = why
                meta["rows"].pop(scenario.name, None)
        out.mkdir(parents=True, exist_ok=True)
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        order = [s.name for s in SCENARIOS]
        rows = sorted(meta["rows"].values(), key=lambda r: order.index(r["name"]))
        (out / "README.md").write_text(readme(version, rows, meta["skipped"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
