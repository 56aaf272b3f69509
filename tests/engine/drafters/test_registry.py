"""The drafter registry: every drafter a run may name has a builder, each slot gets its own
drafter of that name, a chain is built in the order named, and the slots of a session
share ngram-mod's pool."""

from engine.config import DRAFTERS, SIM_DRAFTERS, BackendKind, RunConfig
from engine.drafters.base import ChainDrafter
from engine.drafters.registry import BUILDERS, make_drafter


def test_every_drafter_a_run_may_name_has_a_builder() -> None:
    assert set(BUILDERS) == set(DRAFTERS) - {"none"}


def test_each_sim_drafter_is_built_under_its_name() -> None:
    for name in SIM_DRAFTERS:
        config = RunConfig(backend=BackendKind.SIM, drafter=name)
        drafter = make_drafter(config, 0, {})
        assert (drafter is None) == (name == "none")
        assert drafter is None or drafter.name == name


def test_a_chain_in_the_order_named_sharing_the_pool_across_slots() -> None:
    config = RunConfig(backend=BackendKind.SIM, drafter="ngram-mod,ngram-simple")
    shared: dict = {}
    first, second = make_drafter(config, 0, shared), make_drafter(config, 1, shared)
    assert isinstance(first, ChainDrafter) and isinstance(second, ChainDrafter)
    assert [d.name for d in first.drafters] == ["ngram-mod", "ngram-simple"]
    assert first.drafters[0] is not second.drafters[0]
    assert first.drafters[0].pool is second.drafters[0].pool is shared["ngram-mod"]
