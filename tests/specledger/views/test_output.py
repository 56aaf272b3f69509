"""The progress bar counts turns, so its total is right on every backend."""

import io

import pytest
from rich.console import Console
from rich.progress import Progress

from engine.config import RunConfig
from specledger.api import run_session
from specledger.views.output import TurnBar


class _Watched(TurnBar):
    """Keeps what the bar showed after every update."""

    def __init__(self, bar: Progress, config: RunConfig) -> None:
        self.seen: list[tuple[float, int]] = []
        super().__init__(bar, bar.add_task("t", total=config.slots * config.turns, tokens=0,
                                           done=0), config.answer_cap)

    def _show(self) -> None:
        super()._show()
        task = self.bar.tasks[0]
        self.seen.append((task.completed, self.turns))


@pytest.mark.parametrize("config", [
    RunConfig(backend="sim", turns=3, slots=2, prompt_tokens=64, question_tokens=8,
              answer_tokens=30),
    # A real model ends its answers where it likes, far below the cap.
    RunConfig(backend="torch", turns=2, max_answer_tokens=24, drafter="ngram-mod"),
], ids=["sim", "torch"])
def test_bar_ends_full_and_never_runs_ahead(config: RunConfig, tmp_path: object) -> None:
    with Progress(console=Console(file=io.StringIO())) as bar:
        watched = _Watched(bar, config)
        result = run_session(config, f"{tmp_path}/log.db", progress=watched)
        task = bar.tasks[0]
    assert task.total == config.slots * config.turns == len(result.turns)
    assert task.completed == task.total
    assert task.fields["tokens"] == sum(m.generated_tokens for m in result.turns)
    for completed, turns in watched.seen:
        assert turns <= completed < turns + 1
