#!/bin/sh
# build_llama.sh: build llama.cpp's `llama-server` (CPU) from the llama.cpp that the pinned
# llama-cpp-python source distribution vendors. The binary goes into a cache outside git,
# keyed by that version, and the build is skipped when it is already there. The only network
# use is pip fetching the sdist from the package registry; every download option of llama.cpp's
# own build (curl, the prebuilt web UI) is switched off.
#
# Environment: LLAMA_PY_VERSION (default 0.3.36), SPECLEDGER_CACHE (default ~/.cache/specledger),
# LLAMA_BUILD_JOBS (default: all cores).
set -eu
version=${LLAMA_PY_VERSION:-0.3.36}
cache=${SPECLEDGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specledger}
root="$cache/llama.cpp/$version"
bin="$root/bin/llama-server"
here=$(cd "$(dirname "$0")" && pwd)

if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
    echo "llama-server $version is built: $bin"
    exit 0
fi

sh "$here/ensure_apt.sh" cmake cmake "cmake builds llama-server"
sh "$here/ensure_apt.sh" ninja ninja-build "ninja builds llama-server"
sh "$here/ensure_apt.sh" c++ g++ "a C++ compiler builds llama-server"

python=${PYTHON:-python3}
work="$root/work"
rm -rf "$work"
mkdir -p "$work" "$root/bin"
echo "fetching llama-cpp-python==$version (source distribution) with pip"
"$python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
test -f "$src/CMakeLists.txt" || { echo "error: no vendored llama.cpp in the sdist" >&2; exit 1; }

jobs=${LLAMA_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}
echo "building llama-server with $jobs jobs (10-16 minutes on 2 cores)"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF >"$root/cmake.log" 2>&1 \
    || { tail -20 "$root/cmake.log" >&2; echo "error: cmake failed, see $root/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$root/build.log" 2>&1 \
    || { tail -20 "$root/build.log" >&2; echo "error: build failed, see $root/build.log" >&2; exit 1; }

# The converter and its gguf package travel with the binary: `specledger export gguf` uses them.
rm -rf "$root/convert"
mkdir -p "$root/convert"
cp "$src/convert_hf_to_gguf.py" "$root/convert/"
cp -r "$src/gguf-py" "$root/convert/gguf-py"
[ -d "$src/conversion" ] && cp -r "$src/conversion" "$root/convert/conversion"
cp "$work/build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
rm -rf "$work"
echo "built $bin"
"$bin" --version 2>&1 | head -2
