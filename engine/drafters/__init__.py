"""Drafters: who proposes the tokens a round verifies."""

from engine.drafters.base import Drafter
from engine.drafters.registry import make_drafter

__all__ = ["Drafter", "make_drafter"]
