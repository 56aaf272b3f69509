"""Where a benchmark run writes: by default an ignored folder under the directory it starts
in; the checkout's tracked results, and the calibrated profile the sim ships, only when the
run asks for them (`--record`).

A smoke run (`--quick`) or a run on another machine must never overwrite the numbers the
README quotes, so recording is explicit and refused where there is no checkout to record
into (an installed wheel).
"""

import argparse
from pathlib import Path

from engine.errors import ConfigError
from engine.sim.costs import PROFILE_DIR

DEFAULT_OUT = Path("out/bench")
"""Relative to the current directory; the checkout's `.gitignore` ignores `/out/`."""

CHECKOUT = Path(__file__).resolve().parents[1]
"""The folder above this package: the checkout's root when specbench runs from one."""


def recorded_results(root: Path = CHECKOUT) -> Path:
    """The checkout's tracked `bench/results/`, which `--record` writes; refused (one line)
    when `root` is not a specledger checkout whose sim profiles are this engine's."""
    results = root / "bench" / "results"
    if not (results.is_dir() and (root / "pyproject.toml").is_file()
            and PROFILE_DIR.is_relative_to(root)):
        raise ConfigError(f"bench: --record writes a checkout's tracked bench/results, and "
                          f"{root} is not a specledger checkout (write elsewhere with --out)")
    return results


def results_folder(out: Path | None, record: bool) -> Path:
    """Where a run writes: the checkout's tracked results under `record`, else `out`, else
    `DEFAULT_OUT`."""
    if record:  # the parsers make --record and --out exclusive
        return recorded_results()
    return DEFAULT_OUT if out is None else out


def add_out_flags(parser: argparse.ArgumentParser) -> None:
    """`--out DIR` or `--record` (the checkout's tracked results), not both."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help=f"results folder (default: ./{DEFAULT_OUT}, "
                                                "which git ignores)")
    where.add_argument("--record", action="store_true",
                       help="write the checkout's tracked bench/results (and, for "
                            "calibration, the shipped sim profile); full runs only")


__all__ = ["CHECKOUT", "DEFAULT_OUT", "add_out_flags", "recorded_results", "results_folder"]
