"""Helpers for the command-line tests."""

from specledger.cli.main import main


def exit_status(argv: list[str]) -> int:
    """The CLI's exit status for `argv`, whether `main` returns it or argparse exits with
    it (a refused command line: SystemExit)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
