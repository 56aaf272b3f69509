"""`specledger export gguf MODEL_DIR [--out FILE] [--outtype f32|f16]`: write a checkpoint
as a GGUF file that llama-server loads without extra flags (engine/llama/gguf_export.py)."""

import argparse
from enum import StrEnum
from pathlib import Path
from typing import Any

from engine.llama.gguf_export import OutType, export_gguf
from engine.shipped import model_dir
from specledger import output


class ExportFormat(StrEnum):
    """What `export` writes."""

    GGUF = "gguf"


def default_out(model: str, outtype: str) -> Path:
    """`<checkpoint name>-<outtype>.gguf` in the working directory."""
    return Path(f"{model_dir(model).name}-{outtype}.gguf")


def cmd_export(args: argparse.Namespace) -> int:
    """Export the checkpoint and say where it went."""
    out = Path(args.out) if args.out else default_out(args.model_dir, args.outtype)
    path = export_gguf(args.model_dir, out, args.outtype)
    size = path.stat().st_size
    if args.json:
        output.emit_json({"format": args.format, "model": args.model_dir, "out": str(path),
                          "outtype": args.outtype, "bytes": size})
    else:
        output.console.print(f"wrote {path} ({size / 2**20:.1f} MiB, {args.outtype})")
    return 0


def add_parser(sub: Any) -> None:
    """The `export` subcommand's options (the caller adds --db and --json)."""
    p = sub.add_parser("export", help="write a checkpoint as a GGUF file for llama-server",
                       description="Convert an HF-format checkpoint (or shipped:target, "
                                   "shipped:draft) with the GGUF converter that `make llama` "
                                   "keeps; the file carries the ChatML template, and the "
                                   "target's MTP head as nextn tensors.")
    p.add_argument("format", choices=[f.value for f in ExportFormat])
    p.add_argument("model_dir", metavar="MODEL_DIR",
                   help="checkpoint directory, or shipped:target / shipped:draft")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="file to write (default: <checkpoint name>-<outtype>.gguf)")
    p.add_argument("--outtype", choices=[t.value for t in OutType], default=OutType.F32.value,
                   help="weight type (default f32: computes as the torch engine does)")
