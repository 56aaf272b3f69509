"""The draft profile, where the log's readers import it from: defined in fsm/draft_profile.py,
since the llama.cpp import checks llama-server's own figures with the same definitions."""

from fsm.draft_profile import DraftProfile

__all__ = ["DraftProfile"]
