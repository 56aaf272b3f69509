#!/bin/sh
# cuda_toolkit.sh: print the root of a CUDA toolkit that can build llama.cpp's CUDA backend
# (bin/nvcc, the runtime and cuBLAS with their headers), assembling one when no single
# folder holds them all: tools/build_llama.sh calls it for LLAMA_CUDA=1.
#
# Looked for in order: $CUDA_HOME, /usr/local/cuda, /opt/cuda. A toolkit there without cuBLAS
# (images often ship nvcc alone, and torch's wheels cuBLAS alone) gets it from the Python's
# NVIDIA wheels (nvidia/cu13), else from the registry; the union is a folder of links in the
# cache. No nvcc anywhere: NVIDIA's compiler wheels from the registry (one tree: nvidia/cu13).
# Environment: PYTHON, CACHE (the specledger cache), CUDA_PIP_VERSION (default 13.0, what a
# 580 driver runs). Progress goes to stderr; stdout is the root alone.
set -eu
python=${PYTHON:-python3}
v=${CUDA_PIP_VERSION:-13.0}
store="$CACHE/cuda-toolkit/$v"

has_cublas() { [ -f "$1/include/cublas_v2.h" ] || [ -f "$1/targets/x86_64-linux/include/cublas_v2.h" ]; }
wheels() {  # wheels NAME...: pip-install CUDA $v's wheels into the store
    echo "fetching CUDA $v's $* wheels with pip" >&2
    spec=""
    for name in "$@"; do spec="$spec nvidia-$name==$v.*"; done
    # shellcheck disable=SC2086  # spec is a list of requirements
    "$python" -m pip install -q --no-deps --target "$store" $spec >&2
}
link_libs() {  # unversioned names CMake looks for, beside the versioned ones wheels ship
    for so in cudart cublas cublasLt; do
        [ -e "$1/lib$so.so.13" ] && [ ! -e "$1/lib$so.so" ] && ln -s "lib$so.so.13" "$1/lib$so.so"
    done
    return 0
}

nvcc_root=""
for dir in "${CUDA_HOME:-}" /usr/local/cuda /opt/cuda; do
    if [ -z "$nvcc_root" ] && [ -n "$dir" ] && [ -x "$dir/bin/nvcc" ]; then nvcc_root=$dir; fi
done

if [ -z "$nvcc_root" ]; then
    [ -x "$store/nvidia/cu13/bin/nvcc" ] || wheels cuda-nvcc cuda-crt nvvm cuda-runtime cuda-cccl cublas
    link_libs "$store/nvidia/cu13/lib"
    echo "$store/nvidia/cu13"
    exit 0
fi
if has_cublas "$nvcc_root"; then
    echo "$nvcc_root"
    exit 0
fi

cublas=$("$python" -c 'import pathlib, nvidia
print(next((str(p / "cu13") for p in map(pathlib.Path, nvidia.__path__)
            if (p / "cu13/include/cublas_v2.h").is_file()), ""))' 2>/dev/null || true)
if [ -z "$cublas" ]; then
    [ -f "$store/nvidia/cu13/include/cublas_v2.h" ] || wheels cublas
    cublas="$store/nvidia/cu13"
fi
merged="$store/merged"
rm -rf "$merged"
mkdir -p "$merged"
# -L: a linked folder of the toolkit (lib64 -> lib) becomes a folder of links here, so the
# links below land in the cache, never in the toolkit itself.
cp -rsL "$(cd "$nvcc_root" && pwd -P)/." "$merged/"
for dir in include lib64; do
    [ -L "$merged/$dir" ] && { echo "error: $merged/$dir is a link" >&2; exit 1; }
done
cp -rsn "$cublas/include/." "$merged/include/"
mkdir -p "$merged/lib64"
cp -rsn "$cublas/lib/." "$merged/lib64/"
link_libs "$merged/lib64"
echo "nvcc from $nvcc_root, cuBLAS from $cublas: $merged" >&2
echo "$merged"
