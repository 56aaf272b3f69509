"""llama.cpp's own HF -> GGUF converter, run on one of our checkpoints with one step
replaced: the vocabulary. `gguf_export.export_gguf` runs this module as a child process
(`python -m adapters.llama.gguf.convert MODEL_DIR OUT --outtype f32 --converter DIR [--no-mtp]`).

Why drive the vendored converter rather than write GGUF with the `gguf` package: what
llama.cpp loads is defined by that converter (tensor names, the GDN layers' V-head reorder,
`A_log -> -exp`, the norm offsets, the MTP head as `nextn` tensors of an extra block), and
it ships in the same tree as the `llama-server` we build, so using it keeps the two in step
where a copy of its mapping would drift. A child process because the converter configures
itself through class attributes and process-wide imports (`gguf`, `conversion`), and needs
torch and transformers, which specledger's read-only commands must not load.

Why its vocabulary step cannot run as is, for the byte-level tokenizer the models ship:
- it names the BPE pre-tokenizer by hashing the ids of a probe text, and our hash is in no
  table; with a vocabulary of single bytes every pre-tokenizer split gives the same ids,
  so `default` is right;
- llama.cpp refuses a `gpt2` vocabulary without `tokenizer.ggml.merges`, and gguf's writer
  drops an empty array: MERGES holds one merge of two multi-character pieces, which can
  never fire (a symbol grows past one byte only by a merge, and there is no other), so
  the key is there and no tokenization changes;
- the checkpoint has no tokenizer_config.json, hence no chat template: CHATML_TEMPLATE
  (adapters/chatml.py) is written, the ChatML of `engine.template`, in the Jinja form
  llama-server renders by default (`--jinja` is on) and also recognises as `chatml`
  without it.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from adapters.chatml import CHATML_TEMPLATE
from adapters.llama.gguf.export import OutType
from engine.hybrid.tokenizer import END_OF_TEXT, IM_END, SPECIALS

PRE_TOKENIZER = "default"
MERGES = ("<|im_start|> <|im_end|>",)


def vocab_tokens(tokenizer_json: Path) -> list[str]:
    """The token strings by id, as tokenizer.json spells them (byte-level characters for
    the bytes, the specials as text)."""
    doc: dict[str, Any] = json.loads(tokenizer_json.read_text())
    by_id = {i: t for t, i in doc["model"]["vocab"].items()}
    by_id |= {a["id"]: a["content"] for a in doc.get("added_tokens", [])}
    return [by_id[i] for i in range(len(by_id))]


def write_vocab(writer: Any, gguf: Any, tokens: list[str]) -> None:
    """Write the byte-level vocabulary, its specials and the chat template with the
    converter's GGUFWriter `writer` (`gguf` is the converter's own gguf module)."""
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(PRE_TOKENIZER)
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL
                            for t in tokens])
    writer.add_token_merges(list(MERGES))
    writer.add_eos_token_id(IM_END)  # a chat model's end of turn, as Qwen's
    writer.add_pad_token_id(END_OF_TEXT)
    writer.add_add_bos_token(False)  # ChatML prompts begin with <|im_start|>, no BOS
    writer.add_chat_template(CHATML_TEMPLATE)


def convert(model_dir: Path, out: Path, outtype: str, converter: Path, mtp: bool = True) -> None:
    """Convert `model_dir` to the GGUF file `out` with the converter at `converter`, the
    MTP head included unless `mtp` is False (or the checkpoint has none)."""
    sys.path[:0] = [str(converter / "gguf-py"), str(converter)]
    import gguf
    import torch

    # From 0.3.24 the converter is a package; before, one script that skips the MTP head.
    if (converter / "conversion").is_dir():
        from conversion.qwen import Qwen3_5TextModel
    else:
        from convert_hf_to_gguf import Qwen3_5TextModel

    tokens = vocab_tokens(model_dir / "tokenizer.json")
    config = json.loads((model_dir / "config.json").read_text())

    class ByteLevelQwen35(Qwen3_5TextModel):
        """The converter's Qwen3.5 text model with our vocabulary step."""

        model_arch = gguf.MODEL_ARCH.QWEN35
        # Without an MTP head the converter would look for nextn layers that are not there;
        # without it by choice the file has the plain block count that servers before
        # draft-mtp load. Converters before 0.3.24 skip the head whatever this says.
        no_mtp = not (mtp and config.get("mtp_num_hidden_layers", 0))

        def set_vocab(self) -> None:
            write_vocab(self.gguf_writer, gguf, tokens)

    ftype = {OutType.F32: gguf.LlamaFileType.ALL_F32,
             OutType.F16: gguf.LlamaFileType.MOSTLY_F16}[OutType(outtype)]
    with torch.inference_mode():
        ByteLevelQwen35(model_dir, ftype, out, model_name=model_dir.name).write()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the child process; a failure ends with one `error:` line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--outtype", choices=[t.value for t in OutType], default=OutType.F32)
    parser.add_argument("--converter", type=Path, required=True)
    parser.add_argument("--no-mtp", action="store_true", help="leave the MTP head out")
    args = parser.parse_args(argv)
    try:
        convert(args.model_dir, args.out, args.outtype, args.converter, not args.no_mtp)
    except Exception as exc:  # the parent reports the child's last line
        print(f"error: {type(exc).__name__}: {exc}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
