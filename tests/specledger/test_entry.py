"""Ctrl-C while the `specledger` command loads (its first second, importing the engine and
the ledger) ends it in the one line an interrupted command prints, exit 130, never a
traceback (an interrupt inside an import once surfaced as a RuntimeError)."""

import subprocess
import sys

import pytest

# SIGINT sent to itself as the CLI's loading imports `module` (a finder that only
# watches), then the command run as the installed script runs it.
INTERRUPT_WHILE_LOADING = """
import os, signal, sys
class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None
sys.meta_path.insert(0, Interrupt())
from specledger.entry import main
sys.exit(main(["sessions", "--db", {db!r}]))
"""


# engine.config loads with the parser; sqlalchemy and rich.table when `sessions` runs.
@pytest.mark.parametrize("module", ["engine.config", "sqlalchemy", "rich.table"])
def test_ctrl_c_while_loading_is_one_line(module: str, tmp_path: object) -> None:
    db = f"{tmp_path}/l.db"
    code = INTERRUPT_WHILE_LOADING.format(module=module, db=db)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stderr, done.stdout) == (130, "specledger: interrupted\n", "")


def test_a_loaded_cli_takes_ctrl_c_back(tmp_path: object) -> None:
    """After loading, Ctrl-C is Python's KeyboardInterrupt again, for the CLI to close
    what it recorded (tests/specledger/cli/test_faults.py)."""
    code = ("import signal, sys\nfrom specledger import entry\n"
            f"entry.main(['sessions', '--db', '{tmp_path}/l.db'])\n"
            "sys.exit(signal.getsignal(signal.SIGINT) is not signal.default_int_handler)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
