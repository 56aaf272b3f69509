"""llama-server's tokenizer, read from our GGUF, against ours (engine/hybrid/tokenizer.py):
1,000 random strings (specials, partial specials, control characters, 1- to 4-byte
characters) tokenize to the same ids, and their ids, some with invalid UTF-8 byte runs
spliced in, detokenize to the same text (U+FFFD where the bytes are not UTF-8)."""

import random

from adapters.llama.gguf.convert import CHATML_TEMPLATE
from adapters.llama.server.process import LlamaServer
from engine.hybrid.tokenizer import SPECIALS, decode, encode

N_STRINGS = 1000
PIECES = (
    [chr(c) for c in range(32, 127)]  # printable ASCII
    + ["\n", "\t", "\r", "\x00", "\x01", "\x1b", "\x7f", " ", "  "]
    + ["é", "ß", "ÿ", "Ā", "ж", "ع", "€", "中", "文", "\u200d", "\u0301", "\ufeff", "\uffff"]
    + ["😀", "🦙", "\U0010ffff", "𝔘"]
    + list(SPECIALS) * 3
    + ["<|", "|>", "<|im_", "<|im_start", "im_end|>", "<|endoftext", "<<|im_end|>>"]
)
# Byte runs that are not UTF-8: lone continuation bytes, truncated sequences, overlong
# and surrogate encodings, bytes UTF-8 never uses.
INVALID_RUNS = ([0x80], [0xbf, 0x80], [0xc3], [0xe2, 0x82], [0xf0, 0x9f, 0x98], [0xc0, 0x80],
                [0xed, 0xa0, 0x80], [0xf5, 0x80, 0x80, 0x80], [0xfe], [0xff, 0xfe])


def random_strings(n: int, seed: int = 0) -> list[str]:
    """`n` strings of 0-40 random pieces each (the empty string included)."""
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randrange(41))) for _ in range(n)]


def with_invalid_runs(ids: list[int], rng: random.Random) -> list[int]:
    """`ids` with one to three invalid UTF-8 byte runs spliced in at random places."""
    out = list(ids)
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(out) + 1)
        out[at:at] = rng.choice(INVALID_RUNS) if rng.random() < 0.7 else [
            rng.randrange(0x80, 0x100) for _ in range(rng.randrange(1, 4))]
    return out


def test_tokenize_agrees_on_random_strings(plain_server: LlamaServer) -> None:
    texts = random_strings(N_STRINGS)
    assert any(s in t for t in texts for s in SPECIALS) and "" in texts
    theirs = plain_server.client.tokenize(texts)
    assert len(theirs) == N_STRINGS
    wrong = [(t, ids, encode(t)) for t, ids in zip(texts, theirs, strict=True)
             if ids != encode(t)]
    assert not wrong, f"{len(wrong)}/{N_STRINGS} differ, first: {wrong[0]}"


def test_detokenize_agrees_with_invalid_utf8(plain_server: LlamaServer) -> None:
    rng = random.Random(1)
    runs = [encode(t) for t in random_strings(N_STRINGS, seed=2)]
    runs = [with_invalid_runs(ids, rng) if i % 2 else ids for i, ids in enumerate(runs)]
    # Half got runs spliced in; a random byte next to another may still form UTF-8.
    assert sum("\ufffd" in decode(ids) for ids in runs) >= 0.45 * N_STRINGS
    wrong = []
    for ids in runs:
        text = plain_server.client.detokenize(ids)
        if text != decode(ids):
            wrong.append((ids, text, decode(ids)))
    assert not wrong, f"{len(wrong)}/{N_STRINGS} differ, first: {wrong[0]}"


def test_every_token_is_its_byte_or_special(plain_server: LlamaServer) -> None:
    pieces = plain_server.client.post("/tokenize", {
        "content": list(range(259)), "with_pieces": True})["tokens"]
    for token in pieces:
        piece = token["piece"]
        raw = bytes(piece) if isinstance(piece, list) else piece.encode()
        assert raw == (bytes([token["id"]]) if token["id"] < 256
                       else decode([token["id"]]).encode()), token


def test_chat_template_is_our_chatml(plain_server: LlamaServer) -> None:
    props = plain_server.client.request("GET", "/props")[1]
    assert props["chat_template"] == CHATML_TEMPLATE
    from engine.hybrid.tokenizer import chat_template

    template = chat_template()
    messages = [{"role": "user", "content": "def add(a, b):"},
                {"role": "assistant", "content": "    return a + b"},
                {"role": "user", "content": "def mul(a, b):"}]
    prompt = plain_server.client.apply_template(messages)
    first = template.next_prompt([], encode("def add(a, b):"))
    history = [*first, *encode("    return a + b"), template.im_end]
    assert encode(prompt) == template.next_prompt(history, encode("def mul(a, b):"))
