"""Export one of our HF-format checkpoints (the target with its MTP head, or the draft
model) to a GGUF file that llama-server loads without extra flags.

The conversion is llama.cpp's own converter with our vocabulary step (`adapters.llama.gguf.convert`,
whose docstring says why), run in a child process of this interpreter; this module checks
what it can before starting it and turns a failure into one line.
"""

import hashlib
import importlib.util
import json
import subprocess
import sys
from enum import StrEnum
from pathlib import Path

from adapters.llama.builds.matrix import facts
from adapters.llama.errors import GgufExportError
from adapters.llama.server.paths import DEFAULT_BUILD, cache_root, require_converter
from engine.files import check_target, replacing
from engine.shipped import model_dir as resolve_model

# What the vendored converter imports besides the standard library.
CONVERTER_MODULES = ("torch", "transformers", "numpy", "yaml", "tqdm")
TIMEOUT_S = 600.0
GGUF_MAGIC = b"GGUF"


class OutType(StrEnum):
    """The GGUF tensor type of the exported weights (norms and other 1-D tensors stay f32
    either way, as the converter keeps them)."""

    F32 = "f32"
    F16 = "f16"


def check_checkpoint(model_dir: Path) -> None:
    """Refuse, in one line, a directory the export cannot convert: no config.json, no
    weights, not the Qwen3.5 text architecture, or a tokenizer other than the shipped
    byte-level one (the vocabulary step writes only that one)."""
    config_path = model_dir / "config.json"
    if not config_path.is_file():
        raise GgufExportError(f"{model_dir} has no config.json: pass an HF-format checkpoint "
                              f"directory")
    if not any(model_dir.glob("*.safetensors")):
        raise GgufExportError(f"{model_dir} has no *.safetensors weights")
    try:
        config = json.loads(config_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise GgufExportError(f"{config_path} is not readable JSON: {err}") from None
    if not isinstance(config, dict):
        raise GgufExportError(f"{config_path} holds a JSON {type(config).__name__}, not the "
                              "object of an HF-format checkpoint's config")
    archs = config.get("architectures", [])
    if not isinstance(archs, list) or "Qwen3_5ForCausalLM" not in archs:
        raise GgufExportError(f"{config_path}: architectures {archs} is not "
                              f"['Qwen3_5ForCausalLM'], the only one the export writes")
    tok_path = model_dir / "tokenizer.json"
    if not tok_path.is_file():
        raise GgufExportError(f"{model_dir} has no tokenizer.json")
    from tokenizers import Tokenizer

    try:
        found = Tokenizer.from_file(str(tok_path)).get_vocab(with_added_tokens=True)
    except Exception as err:  # the tokenizers library raises a bare Exception
        raise GgufExportError(f"{tok_path} is not a tokenizer file: {err}") from None
    from engine.hybrid.tokenizer import build_tokenizer  # imports torch: after the cheap checks

    if found != build_tokenizer().get_vocab(with_added_tokens=True):
        raise GgufExportError(f"{tok_path} is not the shipped byte-level tokenizer (259 ids, "
                              f"ChatML specials), the only vocabulary the export writes")


def export_gguf(model_dir: str | Path, out: str | Path, outtype: str = "f32",
                build: str = DEFAULT_BUILD, mtp: bool = True) -> Path:
    """Convert the checkpoint at `model_dir` (a directory, or `shipped:NAME`) to the GGUF
    file `out` with weights in `outtype` (f32 or f16), by the converter of llama.cpp
    `build`, with the MTP head unless `mtp` is False (servers before 0.3.24 load a target
    only without it); return `out`. The file is written
    whole or not at all, under engine/files.py's rules (a missing folder is created; a
    directory or a device is refused before the conversion starts)."""
    model_dir, out = resolve_model(model_dir), Path(out)
    try:
        kind = OutType(outtype)
    except ValueError:
        raise GgufExportError(f"outtype '{outtype}' is not one of "
                              f"{', '.join(t.value for t in OutType)}") from None
    check_target(out)
    if not model_dir.is_dir():
        raise GgufExportError(f"checkpoint directory {model_dir} does not exist")
    check_checkpoint(model_dir)
    converter = require_converter(build)
    missing = [m for m in CONVERTER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise GgufExportError(f"the GGUF converter needs the Python package(s) "
                              f"{', '.join(missing)}: pip install {' '.join(missing)}")
    # Processes that export the same model at once (parallel test workers) each write a
    # partial file of their own and rename it whole.
    with replacing(out) as partial:
        cmd = [sys.executable, "-m", "adapters.llama.gguf.convert", str(model_dir), str(partial),
               "--outtype", kind.value, "--converter", str(converter),
               *([] if mtp else ["--no-mtp"])]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise GgufExportError(f"GGUF conversion of {model_dir} took over "
                                  f"{TIMEOUT_S:.0f} s") from None
        if done.returncode != 0 or not is_gguf(partial):
            lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
            last = lines[-1] if lines else f"exit status {done.returncode}"
            raise GgufExportError(f"GGUF conversion of {model_dir} failed: {last}")
    return out


def is_gguf(path: Path) -> bool:
    """Whether `path` is a file that begins with the GGUF magic."""
    if not path.is_file():  # a fifo would block the read
        return False
    try:
        with path.open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def require_gguf(path: str | Path, what: str) -> Path:
    """`path`, refused in one line unless it is a GGUF file (`what` names the option)."""
    path = Path(path)
    if not path.exists():
        raise GgufExportError(f"{what}: {path} does not exist")
    if not path.is_file():
        raise GgufExportError(f"{what}: {path} is not a file")
    if not is_gguf(path):
        raise GgufExportError(f"{what}: {path} is not a GGUF file (it does not begin with "
                              f"the GGUF magic); pass the .gguf file llama-server ran")
    return path


def model_gguf(model: str | Path, what: str = "model", build: str = DEFAULT_BUILD) -> Path:
    """The GGUF llama-server `build` runs for a model option (`what` names it): a GGUF file
    as it is; a checkpoint directory (or `shipped:NAME`) exported once (`cached_gguf`) by
    the default build's converter, whose file computes as our engine does on every build
    that loads it (`bench converters`: 0.3.24's and 0.3.30's converters halve the rotary
    width of our checkpoints, 0.3.20's and 0.3.21's write files no build loads), without the
    MTP head for a build that has no draft-mtp (0.3.21 refuses a target with one). A
    build's own converter is `specledger export gguf --llama-build VERSION`."""
    path = resolve_model(model)
    if path.is_dir():
        known = facts(build)
        return cached_gguf(path, build=DEFAULT_BUILD,
                           mtp=known is None or "mtp" in known.spec_types)
    if is_gguf(path):
        return path
    if path.exists():
        raise GgufExportError(f"{what}: {path} is neither a checkpoint directory nor a GGUF "
                              "file (it does not begin with the GGUF magic)")
    raise GgufExportError(f"{what}: {path} does not exist: pass a checkpoint directory, "
                          f"shipped:target, shipped:draft or a GGUF file")


def cached_gguf(model: str | Path, outtype: str = "f32", build: str = DEFAULT_BUILD,
                mtp: bool = True) -> Path:
    """The GGUF of checkpoint `model` by `build`'s converter (without the MTP head when
    `mtp` is False), exported once into specledger's cache. The file name carries a digest
    of the checkpoint's files, the llama.cpp build and our conversion step, so a changed
    model or converter makes a new export."""
    root = resolve_model(model)
    h = hashlib.sha256(f"{build}/{outtype}{'' if mtp else '/no-mtp'}".encode())
    h.update(Path(__file__).with_name("convert.py").read_bytes())
    for file in sorted([*root.glob("*.json"), *root.glob("*.safetensors")]):
        h.update(file.name.encode())
        h.update(file.read_bytes())
    path = cache_root() / "gguf" / f"{root.name}-{h.hexdigest()[:16]}-{outtype}.gguf"
    return path if path.is_file() else export_gguf(root, path, outtype, build, mtp)
