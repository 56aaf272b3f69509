"""A throwaway PostgreSQL server for the tests and the ingest benchmark.

`start_cluster` runs initdb in a new temporary directory and starts the server there with
no TCP listener at all: clients reach it through a unix socket in that directory. The
server stops and the directory goes when `stop()` is called, when the `with` block ends,
or at interpreter exit, whichever comes first. initdb refuses to run as root, so as root
the server runs as the `postgres` account the Debian package creates.
"""

import atexit
import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from fsm.errors import SpecledgerError

USER = "specledger"
"""The cluster's superuser; the socket trusts every local connection."""

# A throwaway cluster need not survive a power cut; the benchmark asks for durable ones.
_FAST = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


class PostgresMissingError(SpecledgerError):
    """No PostgreSQL server binaries (initdb, pg_ctl) on this machine."""


class ClusterStartError(SpecledgerError):
    """initdb or the server failed to start."""


def server_bindir() -> Path:
    """The directory of initdb and pg_ctl: $SPECLEDGER_PG_BIN, the PATH, or the newest
    Debian/Ubuntu server package (/usr/lib/postgresql/VERSION/bin)."""
    named = os.environ.get("SPECLEDGER_PG_BIN")
    if named:
        if not (Path(named) / "initdb").is_file():
            raise PostgresMissingError(f"SPECLEDGER_PG_BIN={named} holds no initdb")
        return Path(named)
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    packaged = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/initdb")]
    if packaged:
        return max(packaged, key=lambda p: int(re.sub(r"\D", "", p.parent.name) or 0))
    raise PostgresMissingError(
        "no PostgreSQL server (initdb) found: install it (apt-get install postgresql) or "
        "set SPECLEDGER_PG_BIN to the directory holding initdb and pg_ctl")


@dataclass
class PgCluster:
    """A running throwaway server: its directory (data and socket) and binaries."""

    root: Path
    bindir: Path
    as_user: tuple[str, ...]  # the command prefix that runs a binary as the server's owner
    _stopped: bool = field(default=False, repr=False)

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL of `database` on this server (psycopg 3, the unix socket)."""
        return f"postgresql+psycopg://{USER}@/{database}?host={self.root}"

    @property
    def version(self) -> str:
        """The server's version, as `postgres --version` prints it."""
        done = subprocess.run([str(self.bindir / "postgres"), "--version"],
                              capture_output=True, text=True, check=False)
        return done.stdout.strip()

    def create_database(self, name: str) -> str:
        """Create the empty database `name`; its URL."""
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop `name`, disconnecting whoever is still connected to it."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop the server and remove its directory (again: nothing)."""
        if self._stopped:
            return
        self._stopped = True
        subprocess.run([*self.as_user, str(self.bindir / "pg_ctl"), "stop", "-D",
                        str(self.root / "data"), "-m", "fast", "-w", "-s"],
                       capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(host=str(self.root), user=USER, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(sql.encode())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _owner() -> tuple[tuple[str, ...], int | None]:
    """(command prefix, uid) to run the server as: ourselves, or `postgres` when root."""
    if os.geteuid() != 0:
        return (), None
    try:
        uid = pwd.getpwnam("postgres").pw_uid
    except KeyError:
        raise PostgresMissingError("running as root, and there is no 'postgres' account to "
                                   "run the server as (initdb refuses root)") from None
    return ("runuser", "-u", "postgres", "--"), uid


def start_cluster(durable: bool = False) -> PgCluster:
    """initdb and start a server in a new temporary directory. `durable` keeps fsync and
    synchronous commit on (for benchmarks); otherwise they are off (for tests)."""
    bindir = server_bindir()
    as_user, uid = _owner()
    root = Path(tempfile.mkdtemp(prefix="specledger-pg-"))
    if uid is not None:
        os.chown(root, uid, -1)
    cluster = PgCluster(root, bindir, as_user)
    atexit.register(cluster.stop)
    data, log = root / "data", root / "server.log"
    options = ["-c", "listen_addresses=", "-k", shlex.quote(str(root)), *(() if durable else _FAST)]
    steps = (
        [str(bindir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8",
         "--no-instructions", *(() if durable else ("--no-sync",))],
        [str(bindir / "pg_ctl"), "start", "-D", str(data), "-w", "-t", "60", "-s",
         "-l", str(log), "-o", " ".join(options)],
    )
    for step in steps:
        done = subprocess.run([*as_user, *step], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stderr.strip() or _last_line(log)).splitlines()[-1:]
            cluster.stop()
            raise ClusterStartError(f"{Path(step[0]).name} failed in {root}: "
                                    f"{tail[0] if tail else f'exit {done.returncode}'}")
    return cluster


def _last_line(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
