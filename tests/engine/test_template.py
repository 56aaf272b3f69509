"""The next prompt closes the previous answer the way a chat template does."""

from engine.template import ChatTemplate

T = ChatTemplate(im_start=1, im_end=2, end_of_text=3, nl=(4,), user=(5,), assistant=(6,))


def test_first_prompt_is_the_user_turn_and_header() -> None:
    assert T.next_prompt([], [9]) == [1, 5, 4, 9, 2, 4, 1, 6, 4]


def test_an_answer_that_ended_gets_only_the_separator() -> None:
    prompt = T.next_prompt([7, 8, 2], [9])
    assert prompt[:4] == [7, 8, 2, 4] and prompt[4] == 1


def test_a_cut_answer_is_closed_with_im_end() -> None:
    prompt = T.next_prompt([7, 8], [9])
    assert prompt[:4] == [7, 8, 2, 4] and prompt[4] == 1
