"""The stdlib corpus: function extraction, the fixed split, chat shaping, prompts."""

import textwrap
from pathlib import Path

import pytest

from engine.hybrid.tokenizer import IM_END, chat_template, decode
from engine.training.conversations import (
    MAX_CONVERSATION_TOKENS,
    conversation_prompts,
    conversations,
)
from engine.training.corpus import Split, functions, source_files, split_of

SOURCE = textwrap.dedent('''
    import os


    def add(a, b):
        """Add two numbers."""
        total = a + b
        return total


    class Box:
        @property
        def size(self):
            # the size of the box
            return len(self.items)

        def one_liner(self): return 1

        def only_doc(self):
            """Nothing else."""

        def with_string(self):
            text = """
    not indented
    """
            return text
''')


def test_functions_split_header_from_body() -> None:
    found = {f.signature.splitlines()[-1]: f for f in functions("pkg/mod.py", SOURCE)}
    assert set(found) == {"def add(a, b):", "    # the size of the box"}
    add = found["def add(a, b):"]
    assert add.header == 'def add(a, b):\n    """Add two numbers."""'
    assert add.body == "    total = a + b\n    return total"
    assert add.context == "import os"
    size = found["    # the size of the box"]
    assert size.signature.startswith("@property\ndef size(self):")  # dedented, decorated
    assert size.body == "    return len(self.items)"


def test_unparsable_source_yields_nothing() -> None:
    assert functions("bad.py", "def broken(:\n") == []


def _tree(root: Path, n: int) -> Path:
    for i in range(n):
        (root / f"mod{i}.py").write_text(SOURCE.replace("def add", f"def add{i}"))
    (root / "test").mkdir()
    (root / "test" / "test_x.py").write_text(SOURCE)
    return root


def test_split_is_by_path_hash_and_disjoint(tmp_path: Path) -> None:
    root = _tree(tmp_path, 60)
    train = {p for p, _ in source_files(Split.TRAIN, root)}
    held = {p for p, _ in source_files(Split.HELD_OUT, root)}
    assert train.isdisjoint(held) and held
    assert len(train | held) == 60  # the test directory is left out
    assert all(split_of(p) is Split.HELD_OUT for p in held)


def test_conversations_are_deterministic_and_well_formed(tmp_path: Path) -> None:
    root = _tree(tmp_path, 30)
    first = conversations(Split.TRAIN, root)
    assert first == conversations(Split.TRAIN, root) and first
    template = chat_template()
    for conversation in first:
        tokens = conversation.tokens(template)
        assert len(tokens) <= MAX_CONVERSATION_TOKENS
        assert tokens[-1] == IM_END
        for prompt, answer in conversation.turn_tokens(template):
            assert prompt[-len(template.header):] == template.header
            assert answer[-1] == IM_END and IM_END not in answer[:-1]
    text = decode(first[0].tokens(template))
    assert "Here is code from" in text and "Now complete this one:" in text


def test_real_stdlib_corpus_is_deterministic() -> None:
    a = conversations(Split.TRAIN, max_files=15)
    assert a == conversations(Split.TRAIN, max_files=15)
    assert len(a) > 10


def test_conversation_prompts_open_long_then_go_short() -> None:
    prompts = conversation_prompts(seed=3, n=4)
    assert prompts == conversation_prompts(seed=3, n=4)
    assert prompts != conversation_prompts(seed=4, n=4)
    assert len(prompts) == 4 and all(IM_END not in p for p in prompts)
    assert decode(prompts[0]).startswith("Here is code from")
    assert all(decode(p).startswith("Now complete this one:") for p in prompts[1:])
    assert len(prompts[0]) > max(len(p) for p in prompts[1:])


def test_conversation_prompts_need_a_stdlib(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="held-out"):
        conversation_prompts(0, 2, root=tmp_path)
