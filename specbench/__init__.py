"""`specledger bench`: the measurements by which users compare engines.

Each suite is a module with `run(opts: BenchOptions) -> SuiteResult`; they are imported
only when asked for, so `specledger` starts fast and a suite's heavy imports stay local.
"""

from importlib import import_module

from engine.errors import ConfigError
from specbench.common import BenchOptions, Goal, SuiteResult

SUITES = ("conversation", "strategies", "recorder", "calibration", "drafters", "llama",
          "converters", "ingest", "scale", "batching", "incidents", "engines", "watch",
          "backlog", "real-logs", "interval-logs", "reading")


def run_suite(name: str, opts: BenchOptions) -> SuiteResult:
    """Run one suite, write its files, return its result."""
    if name not in SUITES:
        raise ConfigError(f"bench: unknown suite '{name}' (known: {', '.join(SUITES)})")
    module = import_module(f"specbench.{name.replace('-', '_')}")
    result: SuiteResult = module.run(opts)
    result.write(opts)
    return result


__all__ = ["SUITES", "BenchOptions", "Goal", "SuiteResult", "run_suite"]
