"""The byte-level tokenizer: ids, round trips, specials, tokenizer.json reload."""

from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st
from tokenizers import Tokenizer

from engine.hybrid.tokenizer import (
    END_OF_TEXT,
    IM_END,
    IM_START,
    VOCAB_SIZE,
    build_tokenizer,
    chat_template,
    decode,
    encode,
)


def test_ids_are_bytes_then_specials() -> None:
    assert encode("A\n\x00é") == [65, 10, 0, 0xC3, 0xA9]
    assert (END_OF_TEXT, IM_START, IM_END, VOCAB_SIZE) == (256, 257, 258, 259)
    assert encode("<|endoftext|><|im_start|><|im_end|>") == [256, 257, 258]
    assert build_tokenizer().get_vocab_size() == VOCAB_SIZE


SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


@given(st.text(max_size=200) | st.sampled_from(SPECIALS).map(lambda s: s[:-1]))
def test_text_round_trips(text: str) -> None:
    """Text holding no special marker is its UTF-8 bytes (a marker's prefix included); the
    markers themselves are one id each (the test below)."""
    assume(not any(special in text for special in SPECIALS))
    ids = encode(text)
    assert ids == list(text.encode("utf-8"))
    assert decode(ids) == text


def test_specials_round_trip_inside_text() -> None:
    text = "<|im_start|>user\nx = 1<|im_end|>\n<|im_start|>assistant\n    pass<|im_end|>"
    ids = encode(text)
    assert ids.count(IM_START) == 2 and ids.count(IM_END) == 2
    assert decode(ids) == text


def test_tokenizer_json_reloads_through_tokenizers(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    build_tokenizer().save(str(path))
    reloaded = Tokenizer.from_file(str(path))
    text = "<|im_start|>user\ndef f(x):<|im_end|>\tü"
    assert reloaded.encode(text, add_special_tokens=False).ids == encode(text)
    assert reloaded.decode(encode(text), skip_special_tokens=False) == text
    assert reloaded.token_to_id("<|im_end|>") == IM_END


def test_chat_template_uses_the_specials_and_byte_roles() -> None:
    template = chat_template()
    assert template.eog_ids == {IM_END, END_OF_TEXT}
    assert template.header == [IM_START, *b"assistant", 10]
    assert decode(template.user_turn(encode("hi"))) == "<|im_start|>user\nhi<|im_end|>\n"
