#!/bin/sh
# gpu_carry.sh: fill .gpu/ (git-ignored) with what bench/gpu_session.sh needs on a lent GPU
# machine, which reaches no package registry. Run here, in the repo root, once per session:
#
#   sh tools/gpu_carry.sh           then device run: carry [".gpu"], `sh bench/gpu_session.sh`
#
#   .gpu/whl/          wheels the GPU image lacks (its Python is 3.12), at the versions this
#                      checkout's .venv runs: the ledger (SQLAlchemy, orjson), the round machine
#                      (transitions, six), graphviz's bindings, the llama backend's `openai`
#                      client and its needs, fla-core for the kernel comparison
#   .gpu/llama-src.tar.xz  the pinned llama.cpp source without its models, docs and tests (the
#                      sdist is 76 MB; a call carries 64 MiB in all)
#   .gpu/gguf/         the shipped target's and draft model's GGUF exports, as the cache
#                      names them (the machine then converts nothing)
# (The CUDA server itself does not fit: 82 MB, 43 MB under xz. The machine builds it.)
# Environment: PYTHON (default .venv/bin/python), LLAMA_PY_VERSION (default 0.3.36).
set -eu
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
version=${LLAMA_PY_VERSION:-0.3.36}
mkdir -p .gpu
rm -rf .gpu/whl .gpu/gguf .gpu/llama-src.tar.xz
mkdir -p .gpu/whl .gpu/gguf

pinned() {  # NAME: NAME==the version .venv runs, else NAME
    v=$("$py" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p')
    echo "$1${v:+==$v}"
}
for name in SQLAlchemy orjson transitions six graphviz openai httpx2 httpcore2 truststore \
            pydantic pydantic_core annotated-types typing-inspection jiter sniffio \
            typing_extensions; do
    set -- "$@" "$(pinned "$name")"
done
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .gpu/whl "$@" fla-core==0.5.2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work"
tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
# The sdist's llama.cpp is a git checkout (a submodule): the banner's build number and commit
# come from git, which the pruned copy lacks; they are written into its CMake defaults so its
# servers name their build as the sdist's do (`show` and `import` know a build by commit).
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
commit=$(git -C "$src" rev-parse --short HEAD)
number=$(git -C "$src" rev-list --count HEAD)
sed -i "s/^set(BUILD_NUMBER 0)/set(BUILD_NUMBER $number)/; s/^set(BUILD_COMMIT \"unknown\")/set(BUILD_COMMIT \"$commit\")/" \
    "$src/cmake/build-info.cmake"
sed -i "s/set(GGML_BUILD_COMMIT \"unknown\")/set(GGML_BUILD_COMMIT \"$commit\")/" "$src/ggml/CMakeLists.txt"
grep -q "set(BUILD_COMMIT \"$commit\")" "$src/cmake/build-info.cmake" \
    || { echo "error: could not write the commit into cmake/build-info.cmake" >&2; exit 1; }
# Only what `llama-server` and the converter need: models/ (tokenizer test vocabularies),
# docs, tests and the other backends' sources stay behind (the web UI is built off, but its
# CMake folder must be there).
tar -cJf .gpu/llama-src.tar.xz -C "$work/llama_cpp_python-$version/vendor" \
    --exclude=llama.cpp/models --exclude=llama.cpp/docs --exclude=llama.cpp/media \
    --exclude=llama.cpp/benches --exclude=llama.cpp/.github --exclude=llama.cpp/.git \
    --exclude=llama.cpp/tests --exclude=llama.cpp/examples \
    $(for b in blas cann et hexagon hip metal musa opencl openvino rpc sycl virtgpu vulkan \
               webgpu zdnn zendnn; do echo "--exclude=llama.cpp/ggml/src/ggml-$b"; done) \
    llama.cpp

"$py" - <<'PY'
import shutil
from adapters.llama.gguf.export import model_gguf
for name in ("shipped:target", "shipped:draft"):
    shutil.copy(model_gguf(name), ".gpu/gguf/")
PY

tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carry=$(du -sb .gpu | cut -f1)
echo "carry: .gpu $((carry / 1048576)) MiB + the tree $((tree / 1048576)) MiB (at most 64 MiB)"
ls -la .gpu .gpu/whl .gpu/gguf
[ $((carry + tree)) -lt $((64 * 1048576)) ] || { echo "error: over the 64 MiB a call carries" >&2; exit 1; }
