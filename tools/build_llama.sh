#!/bin/sh
# build_llama.sh: build llama.cpp's `llama-server` from the llama.cpp that the pinned
# llama-cpp-python source distribution vendors. The binary goes into a cache outside git,
# keyed by that version, and the build is skipped when it is already there. The only network
# use is pip fetching the sdist (and, for a CUDA build on a machine without nvcc, the CUDA
# compiler's wheels) from the package registry; every download option of llama.cpp's own
# build (curl, the prebuilt web UI) is switched off.
#
# Environment: LLAMA_PY_VERSION (default 0.3.36), SPECLEDGER_CACHE (default ~/.cache/specledger),
# LLAMA_BUILD_JOBS (default: all cores), LLAMA_SRC (a llama.cpp source folder to build instead
# of the sdist's: a machine without a network, see tools/gpu_carry.sh),
# LLAMA_CUDA=1 (build with CUDA into bin/llama-server-cuda; the CPU build is untouched),
# LLAMA_CUDA_ARCH (default 90: the H100 and H200), CUDA_PIP_VERSION (the toolkit taken from
# the registry when a toolkit lacks it; tools/cuda_toolkit.sh finds or assembles one).
set -eu
version=${LLAMA_PY_VERSION:-0.3.36}
cache=${SPECLEDGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specledger}
root="$cache/llama.cpp/$version"
cuda=${LLAMA_CUDA:-0}
name=llama-server
[ "$cuda" = 1 ] && name=llama-server-cuda
bin="$root/bin/$name"
here=$(cd "$(dirname "$0")" && pwd)

# A CUDA binary's --version needs a driver; on a machine without one, its file is enough.
if [ -x "$bin" ] && { [ "$cuda" = 1 ] || "$bin" --version >/dev/null 2>&1; }; then
    echo "$name $version is built: $bin"
    exit 0
fi

sh "$here/ensure_apt.sh" cmake cmake "cmake builds llama-server"
sh "$here/ensure_apt.sh" ninja ninja-build "ninja builds llama-server"
sh "$here/ensure_apt.sh" c++ g++ "a C++ compiler builds llama-server"

python=${PYTHON:-python3}
work="$root/work-$name"
rm -rf "$work"
mkdir -p "$work" "$root/bin"
if [ -n "${LLAMA_SRC:-}" ]; then
    src=$LLAMA_SRC
else
    echo "fetching llama-cpp-python==$version (source distribution) with pip"
    "$python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
    tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
    src="$work/llama_cpp_python-$version/vendor/llama.cpp"
fi
test -f "$src/CMakeLists.txt" || { echo "error: no llama.cpp source in $src" >&2; exit 1; }

cuda_flags=""
if [ "$cuda" = 1 ]; then
    toolkit=$(PYTHON=$python CACHE=$cache sh "$here/cuda_toolkit.sh")
    echo "CUDA: $("$toolkit/bin/nvcc" --version | tail -1) in $toolkit, architectures ${LLAMA_CUDA_ARCH:-90}"
    # VMM off: ggml would link the driver library itself, which a toolkit from wheels lacks
    # (a driver's own libcuda.so.1 is loaded at run time either way); NCCL: one GPU.
    cuda_flags="-DGGML_CUDA=ON -DCMAKE_CUDA_COMPILER=$toolkit/bin/nvcc
        -DCUDAToolkit_ROOT=$toolkit -DCMAKE_CUDA_ARCHITECTURES=${LLAMA_CUDA_ARCH:-90}
        -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_NO_VMM=ON"
fi

jobs=${LLAMA_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
minutes="10-16 minutes"
[ "$cuda" = 1 ] && minutes="about 46 minutes"
echo "building $name with $jobs jobs ($minutes on 2 cores)"
# shellcheck disable=SC2086  # cuda_flags is a list of words
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF $cuda_flags >"$root/cmake-$name.log" 2>&1 \
    || { tail -20 "$root/cmake-$name.log" >&2
         echo "error: cmake failed, see $root/cmake-$name.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$root/build-$name.log" 2>&1 \
    || { tail -20 "$root/build-$name.log" >&2
         echo "error: build failed, see $root/build-$name.log" >&2; exit 1; }

# The converter and its gguf package travel with the binary: `specledger export gguf` uses them.
rm -rf "$root/convert"
mkdir -p "$root/convert"
cp "$src/convert_hf_to_gguf.py" "$root/convert/"
cp -r "$src/gguf-py" "$root/convert/gguf-py"
[ -d "$src/conversion" ] && cp -r "$src/conversion" "$root/convert/conversion"
cp "$work/build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
rm -rf "$work"
echo "built $bin"
[ "$cuda" = 1 ] || "$bin" --version 2>&1 | head -2
