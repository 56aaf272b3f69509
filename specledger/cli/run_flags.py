"""The `specledger run` flags, generated from `RunConfig`'s fields: name, type, choices,
bounds, default and help are written once, in `engine/config.py`."""

import argparse
from collections.abc import Callable
from dataclasses import Field, fields
from enum import StrEnum
from functools import partial
from typing import Any

from engine.config import RunConfig, out_of_bounds


def flag_name(f: Field[Any]) -> str:
    """The command-line spelling of a field: `draft_max` -> `--draft-max`; a bool that is
    on by default is spelled by the flag that turns it off (`--no-audit`)."""
    return f.metadata.get("negate") or "--" + f.name.replace("_", "-")


def checked(kind: type, problem: Callable[[Any], str]) -> Callable[[str], Any]:
    """An argparse type: `kind(raw)`, refused (a usage error, exit 2) when it does not parse
    or when `problem(value)` says why not."""

    def convert(raw: str) -> Any:
        try:
            value = kind(raw)
        except ValueError:
            what = {int: "an integer", float: "a number"}.get(kind, "a value")
            raise argparse.ArgumentTypeError(f"'{raw}' is not {what}") from None
        why = problem(value)
        if why:
            raise argparse.ArgumentTypeError(why)
        return value

    convert.__name__ = kind.__name__  # argparse names the type in its messages
    return convert


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """Add one flag per `RunConfig` field to `p`."""
    for f in fields(RunConfig):
        meta = f.metadata
        # The field's own default, not an instance's: those are resolved for the sim
        # (an empty drafter becomes the sim's drafter).
        default = meta["cli_default"] if meta.get("cli_default") is not None else f.default
        name, dest, text = flag_name(f), f.name, meta["help"]
        if f.type is bool:
            action = "store_false" if meta.get("negate") else "store_true"
            p.add_argument(name, dest=dest, action=action, default=default, help=text)
            continue
        convert: Callable[[str], Any] = str
        if isinstance(f.type, type) and issubclass(f.type, StrEnum):
            choices: list[str] | None = [m.value for m in f.type]
            default = default.value
        else:
            choices = list(meta["choices"]) or None
            if f.type is not str:
                convert = checked(f.type, partial(out_of_bounds, f))
        shown = "" if default == "" else f" (default: {default})"
        p.add_argument(name, dest=dest, type=convert, choices=choices, default=default,
                       help=text + shown)


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The validated run configuration the flags describe."""
    return RunConfig(**{f.name: getattr(args, f.name) for f in fields(RunConfig)})


def run_flag_names() -> list[str]:
    """Every `run` flag, in field order (the README's CLI block must list exactly these)."""
    return [flag_name(f) for f in fields(RunConfig)]
