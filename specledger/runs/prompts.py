"""The user messages of a recorded session, read back from its prompts.

A re-execution must send the same requests as the recorded run even if the backend's own
question generator (a corpus, a seed scheme) has changed since, so the questions come from
the log: each turn's prompt, as START_TURN recorded it, ends with the new user message
and the generation header of the chat template.
"""

from collections.abc import Iterable, Sequence

from engine.conversation import Conversation
from engine.template import ChatTemplate
from eventlog.projection import Projector
from fsm.errors import SpecledgerError
from fsm.event import Event
from fsm.states import Trigger

Questions = dict[tuple[int, int], list[int]]


class PromptError(SpecledgerError):
    """A recorded prompt does not have the chat template's shape, or a turn has none."""


def user_message(prompt: Sequence[int], template: ChatTemplate) -> list[int]:
    """The last user message of a prompt built by `template.next_prompt`."""
    opening = [template.im_start, *template.user, *template.nl]
    closing = [template.im_end, *template.nl, *template.header]
    end = len(prompt) - len(closing)
    if end < len(opening) or list(prompt[end:]) != closing:
        raise PromptError("a recorded prompt does not end with a user message and the "
                          "generation header of this backend's chat template")
    for start in range(end - len(opening), -1, -1):
        if list(prompt[start:start + len(opening)]) == opening:
            return list(prompt[start + len(opening):end])
    raise PromptError("a recorded prompt has no user message in this backend's chat template")


def recorded_questions(events: Iterable[Event], template: ChatTemplate) -> Questions:
    """Each (slot, turn)'s user message, from the prompts the log recorded: the slot's
    tokens as the projection has them at the turn's start."""
    projector = Projector()
    out: Questions = {}
    for ev in events:
        projector.apply(ev)
        if ev.trigger is Trigger.START_TURN:
            out[(ev.slot, ev.turn)] = user_message(projector.slots[ev.slot].tokens, template)
    return out


class RecordedQuestions:
    """A `Conversation` answered from the log; turns the log lacks (a counterfactual with
    more turns) come from `fallback`, the configuration's own source, when there is one."""

    def __init__(self, questions: Questions, fallback: Conversation | None) -> None:
        self.questions = questions
        self.fallback = fallback

    def question(self, slot: int, turn: int) -> list[int]:
        """The question of `slot`'s `turn`."""
        q = self.questions.get((slot, turn))
        if q is not None:
            return list(q)
        if self.fallback is None:
            raise PromptError(f"the recorded session has no question for slot {slot} turn "
                              f"{turn} and no source generates one")
        return self.fallback.question(slot, turn)
