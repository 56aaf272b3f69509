"""Drafters: who proposes the tokens a round verifies."""

from engine.drafters.base import Drafter, make_drafter

__all__ = ["Drafter", "make_drafter"]
