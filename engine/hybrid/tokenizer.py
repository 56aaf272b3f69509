"""The byte-level tokenizer of the shipped models: one token per byte plus the three ChatML
specials, built with `tokenizers` so it saves and loads as a standard tokenizer.json.

Ids: byte b is id b (0..255); `<|endoftext|>` 256, `<|im_start|>` 257, `<|im_end|>` 258
(the order Qwen uses for its specials); vocabulary size 259.
"""

from collections.abc import Sequence
from functools import lru_cache

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

from engine.template import ChatTemplate

END_OF_TEXT = 256
IM_START = 257
IM_END = 258
SPECIALS = {"<|endoftext|>": END_OF_TEXT, "<|im_start|>": IM_START, "<|im_end|>": IM_END}
VOCAB_SIZE = 259


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-to-printable-character map, indexed by byte: the ByteLevel
    pre-tokenizer writes each byte as this character, so the BPE vocabulary must too."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    # The other bytes take the characters from 256 on, in byte order.
    others = [b for b in range(256) if b not in printable]
    chars = {b: b for b in printable} | {b: 256 + i for i, b in enumerate(others)}
    return [chr(chars[b]) for b in range(256)]


def build_tokenizer() -> Tokenizer:
    """A fresh byte-level `Tokenizer` (no merges, so every byte is its own token)."""
    vocab = {char: byte for byte, char in enumerate(_byte_alphabet())}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    # No regex split and no prefix space: the bytes map one to one onto tokens.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    for text in sorted(SPECIALS, key=SPECIALS.__getitem__):  # added in id order: 256, 257, 258
        tokenizer.add_special_tokens([AddedToken(text, special=True, normalized=False)])
    return tokenizer


@lru_cache(maxsize=1)
def _shared() -> Tokenizer:
    return build_tokenizer()


def encode(text: str) -> list[int]:
    """Token ids of `text`; special-token spellings in it become their special ids."""
    return _shared().encode(text, add_special_tokens=False).ids


def decode(ids: Sequence[int]) -> str:
    """Text of `ids`, specials spelled out; invalid UTF-8 becomes U+FFFD."""
    return _shared().decode(list(ids), skip_special_tokens=False)


def chat_template() -> ChatTemplate:
    """The ChatML template in this tokenizer's ids."""
    return ChatTemplate(im_start=IM_START, im_end=IM_END, end_of_text=END_OF_TEXT,
                        nl=tuple(b"\n"), user=tuple(b"user"), assistant=tuple(b"assistant"))
