"""The sim's vocabulary: ordinary tokens below `SPECIAL_BASE`, template specials above."""

from engine.template import ChatTemplate

VOCAB = 32000
SPECIAL_BASE = VOCAB
IM_START, IM_END, END_OF_TEXT, NL, USER, ASSISTANT = range(SPECIAL_BASE, SPECIAL_BASE + 6)

SIM_TEMPLATE = ChatTemplate(
    im_start=IM_START,
    im_end=IM_END,
    end_of_text=END_OF_TEXT,
    nl=(NL,),
    user=(USER,),
    assistant=(ASSISTANT,),
)
