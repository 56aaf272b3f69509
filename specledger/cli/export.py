"""`specledger export`: a checkpoint or a recorded session, for other tools.

- `specledger export gguf MODEL_DIR [--out FILE] [--outtype f32|f16] [--llama-build V]
  [--no-mtp]`: write a checkpoint as a GGUF file that llama-server loads without extra
  flags, with the converter of llama.cpp build V (default: the default build), the MTP
  head left out with --no-mtp (adapters/llama/gguf/export.py).
- `specledger export SESSION --format perfetto|chrome-trace|parquet [--out FILE]`: write a
  session's rounds as a Perfetto or Chrome trace, or its events as a Parquet table
  (specledger/export/).
"""

import argparse
from enum import StrEnum
from pathlib import Path
from typing import Any

from adapters.llama.gguf.export import OutType
from adapters.llama.server.paths import DEFAULT_BUILD
from engine.shipped import model_dir
from specledger.cli.options import add_common
from specledger.errors import UsageError
from specledger.export import SessionFormat


class ExportFormat(StrEnum):
    """What `export` writes: a checkpoint's GGUF, or one of the session formats."""

    GGUF = "gguf"
    PERFETTO = SessionFormat.PERFETTO.value
    CHROME_TRACE = SessionFormat.CHROME_TRACE.value
    PARQUET = SessionFormat.PARQUET.value


_SUFFIX = {SessionFormat.PERFETTO: "pftrace", SessionFormat.CHROME_TRACE: "trace.json",
           SessionFormat.PARQUET: "parquet"}


def default_out(model: str, outtype: str) -> Path:
    """`<checkpoint name>-<outtype>.gguf` in the working directory."""
    return Path(f"{model_dir(model).name}-{outtype}.gguf")


def default_session_out(session: int, fmt: SessionFormat) -> Path:
    """`session-N.pftrace`, `session-N.trace.json` or `session-N.parquet` here."""
    return Path(f"session-{session}.{_SUFFIX[fmt]}")


def run(args: argparse.Namespace) -> int:
    """Export the checkpoint or the session and say where it went."""
    if args.session is not None:
        return _export_session(args)
    if args.format != ExportFormat.GGUF:
        raise UsageError("--format is for a session: export SESSION --format "
                         f"{'|'.join(f.value for f in SessionFormat)}")
    if args.model_dir is None:
        raise UsageError("export gguf needs the checkpoint: export gguf MODEL_DIR")
    from adapters.llama.gguf.export import export_gguf
    from adapters.llama.server.paths import check_build
    from specledger.views import output

    out = Path(args.out) if args.out else default_out(args.model_dir, args.outtype)
    build = check_build(args.llama_build)
    path = export_gguf(args.model_dir, out, args.outtype, build, mtp=not args.no_mtp)
    size = path.stat().st_size
    if args.json:
        output.emit_json({"format": args.format, "model": args.model_dir, "out": str(path),
                          "outtype": args.outtype, "llama_build": build,
                          "mtp": not args.no_mtp, "bytes": size})
    else:
        output.console.print(f"wrote {path} ({size / 2**20:.1f} MiB, {args.outtype}, "
                             f"llama.cpp {build}'s converter)")
    return 0


def _export_session(args: argparse.Namespace) -> int:
    if args.format in (None, ExportFormat.GGUF):
        raise UsageError(f"export {args.session} needs --format "
                         f"{'|'.join(f.value for f in SessionFormat)}")
    if args.model_dir is not None:
        raise UsageError(f"export {args.session} takes no MODEL_DIR ('{args.model_dir}')")
    from eventlog import open_db
    from specledger.export import export_session
    from specledger.views import output

    fmt = SessionFormat(args.format)
    out = Path(args.out) if args.out else default_session_out(args.session, fmt)
    done = export_session(open_db(args.db, create=False), args.session, fmt, out)
    if args.json:
        output.emit_json({"format": fmt.value, "session": args.session, "out": str(out),
                          "records": done.records, "bytes": done.bytes})
    else:
        what = "rows" if fmt is SessionFormat.PARQUET else "trace records"
        output.console.print(f"wrote {out} ({done.records:,} {what}, "
                             f"{done.bytes / 2**20:.1f} MiB)")
    return 0


class _Target(argparse.Action):
    """The first positional: `gguf` (a checkpoint follows) or a session's id."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if values == ExportFormat.GGUF.value:
            namespace.format = values
            return
        try:
            namespace.session = int(values)
        except ValueError:
            raise argparse.ArgumentError(
                self, f"invalid choice: '{values}' (choose gguf, or a session id)") from None


def add_parser(sub: Any) -> None:
    """The `export` subcommand's options (the caller adds --db and --json)."""
    p = sub.add_parser("export",
                       help="write a session as a Perfetto or Chrome trace or a Parquet "
                            "table, or a checkpoint as a GGUF file for llama-server",
                       description="export SESSION --format: the session's rounds as a "
                                   "trace (a track per slot, a slice per round phase, the "
                                   "postmortem's findings as instants) or its events as a "
                                   "table. export gguf MODEL_DIR: convert an HF-format "
                                   "checkpoint (or shipped:target, shipped:draft) with the "
                                   "GGUF converter of a llama.cpp build (`make llama` keeps "
                                   "the default build's); the file carries the ChatML "
                                   "template, and the target's MTP head as nextn tensors "
                                   "(converters from 0.3.24 on; older ones skip it).")
    p.add_argument("format", metavar="gguf|SESSION", action=_Target,
                   help="gguf (then MODEL_DIR), or the id of a recorded session")
    p.add_argument("model_dir", metavar="MODEL_DIR", nargs="?", default=None,
                   help="gguf: checkpoint directory, or shipped:target / shipped:draft")
    p.add_argument("--format", dest="format", default=None,
                   choices=[f.value for f in SessionFormat],
                   help="a session's format: perfetto (protobuf), chrome-trace (JSON), "
                        "parquet")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="file to write (default: <checkpoint name>-<outtype>.gguf, or "
                        "session-N.pftrace / .trace.json / .parquet)")
    p.add_argument("--outtype", choices=[t.value for t in OutType], default=OutType.F32.value,
                   help="gguf weight type (default f32: computes as the torch engine does)")
    p.add_argument("--llama-build", default=DEFAULT_BUILD, metavar="VERSION",
                   help="gguf: convert with this llama.cpp build's own converter, by "
                        f"llama-cpp-python version (default: {DEFAULT_BUILD}; `specledger "
                        "llama builds`)")
    p.add_argument("--no-mtp", action="store_true",
                   help="gguf: leave the target's MTP head out (llama.cpp builds before "
                        "0.3.24 load the shipped target only without it)")
    p.set_defaults(session=None)
    add_common(p)
    p.set_defaults(run=run)
