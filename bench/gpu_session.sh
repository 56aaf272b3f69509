#!/bin/sh
# Issue 30 on a lent GPU as one prepared command (docs/gpu.md). Here first, in the repo root:
#
#   sh tools/gpu_carry.sh                     fills .gpu/ (wheels, llama.cpp source, GGUFs)
#   GPU_SESSION_DEVICE=cpu OUT=/tmp/gpu-dry sh bench/gpu_session.sh
#                                             every step on this CPU at toy sizes: the rehearsal
# then on the device (run: carry [".gpu"], timeout_s 600):
#
#   sh bench/gpu_session.sh                   $OUT/results.tgz and $OUT/summary.txt come back
#
# Steps, each under a time limit inside one budget (GPU_SESSION_BUDGET_S, default 540 s); a
# step that fails or runs out of time is written down and the next runs. A second try runs
# only the steps it names: GPU_SESSION_STEPS="llama torch_speculative" (default: all).
#   0. the machine (GPU, driver, torch, triton, nvcc, cuBLAS) and the carried wheels
#   -  llama.cpp's CUDA server built in the background from .gpu/llama-src.tar.xz
#   1. the kernel and torch-backend tests on the device (pytest --device cuda)
#   2. bench/kernels_gpu.py; `bench strategies`; bench/torch_speculative.py on the device
#   3. llama.cpp's CUDA server: the held-out calibration check (fit logs and predictions) and
#      recorded MTP and ngram-mod sessions; their -v logs, answers and the ledger come back
set -u
device=${GPU_SESSION_DEVICE:-cuda}
out=${OUT:?"OUT: the folder results go to (the device tool sets it)"}
res=$(mktemp -d)
start=$(date +%s)
deadline=$((start + ${GPU_SESSION_BUDGET_S:-540}))
summary="$res/summary.txt"

want() { [ -z "${GPU_SESSION_STEPS:-}" ] || case " $GPU_SESSION_STEPS " in *" $1 "*) ;; *) false ;; esac; }
say() { echo "[$(($(date +%s) - start)) s] $*" | tee -a "$summary"; }
left() { echo $((deadline - $(date +%s))); }
# step NAME LIMIT_S COMMAND...: run with its output in NAME.log, under the smaller of its
# limit and what the budget has left (30 s kept for packing); written down either way.
step() {
    name=$1 limit=$2
    shift 2
    room=$(($(left) - 30))
    [ "$room" -lt "$limit" ] && limit=$room
    if [ "$limit" -lt 10 ]; then
        say "$name: skipped, the budget is spent"
        return 0
    fi
    t=$(date +%s)
    timeout -k 5 "$limit" "$@" >"$res/$name.log" 2>&1
    rc=$?
    say "$name: exit $rc in $(($(date +%s) - t)) s (limit $limit s)"
    tail -3 "$res/$name.log" | sed 's/^/    /' | tee -a "$summary"
}
pack() {
    tar -czf "$out/results.tgz" -C "$res" . && cp "$summary" "$out/summary.txt"
    say "packed: $(du -h "$out/results.tgz" | cut -f1)"
}

if [ "$device" = cuda ]; then
    py=python3
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .gpu/whl/*.whl >"$res/wheels.log" 2>&1 || say "wheels: failed"
    export PYTHONPATH="/tmp/site:$PWD"
    export SPECLEDGER_CACHE=/tmp/slcache
    mkdir -p "$SPECLEDGER_CACHE/gguf"
    cp .gpu/gguf/*.gguf "$SPECLEDGER_CACHE/gguf/"
    quick="" workers=4
else  # the rehearsal: this checkout's environment, its built llama-server and GGUFs
    py=${PYTHON:-.venv/bin/python}
    export PYTHONPATH="$PWD"
    cache=${SPECLEDGER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specledger}
    SPECLEDGER_CACHE=$(mktemp -d)
    export SPECLEDGER_CACHE
    ln -s "$cache/llama.cpp" "$cache/gguf" "$SPECLEDGER_CACHE/"
    quick=--quick workers=2
fi
trap 'rm -rf "$res" "$SPECLEDGER_CACHE"' EXIT
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
mkdir -p "$out"
say "device $device, budget $(left) s"

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    "$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())'
    "$py" -c 'import triton; print("triton", triton.__version__)'
    "$py" -c 'import sqlalchemy, transitions, graphviz, orjson, openai; print("wheels import")'
    command -v nvcc && nvcc --version | tail -1
    ls /usr/local/cuda/lib64 2>&1 | grep -E "cublas|cudart" | head -4
    nproc
} >"$res/env.txt" 2>&1
sed 's/^/    /' "$res/env.txt" | tee -a "$summary"

server=$("$py" -c 'from adapters.llama.server.paths import server_path; print(server_path(cuda=True))')
if [ "$device" = cuda ] && want llama; then
    # 52 CPU-minutes (measured on the 2-core machine): 4-5 minutes on 12 of the 16 cores,
    # the rest left to the GPU steps' launches; a session of its own, so that stopping it
    # stops its compilers too
    mkdir -p /tmp/llsrc && tar -xJf .gpu/llama-src.tar.xz -C /tmp/llsrc
    LLAMA_SRC=/tmp/llsrc/llama.cpp LLAMA_CUDA=1 LLAMA_BUILD_JOBS=12 PYTHON=$py \
        setsid nice sh tools/build_llama.sh >"$res/llama_build.log" 2>&1 &
    build=$!
    say "llama-server-cuda: building in the background"
fi

llama_steps() {  # 3: the CUDA server's logs, sessions and postmortems
    if [ -n "${build:-}" ]; then
        say "llama-server-cuda: waiting for its build ($(left) s left)"
        while kill -0 "$build" 2>/dev/null && [ "$(left)" -gt 150 ]; do sleep 5; done
        kill -0 "$build" 2>/dev/null && { kill -- "-$build"; say "llama-server-cuda: build stopped"; }
        tail -3 "$res/llama_build.log" | sed 's/^/    /' | tee -a "$summary"
        build=""
    fi
    if [ "$device" = cuda ] && [ ! -x "$server" ]; then
        say "llama: no CUDA server, its steps skipped"
        return 0
    fi
    repeat=3
    [ "$device" = cpu ] && repeat=1
    # only the default build's server is built here
    step calibration_llama 150 "$py" -m specbench.calibration.llama.logs $quick \
        --device "$device" --repeat "$repeat" --builds 0.3.36 --out "$res/calibration_llama"
    cp -r "$SPECLEDGER_CACHE/logs/calibration_llama_logs" "$res/calibration_logs" 2>/dev/null
    mkdir -p "$res/runs"
    for drafter in mtp ngram-mod; do  # the server's log and answers land in runs/
        TMPDIR="$res/runs" step "run_$drafter" 60 "$py" -m specledger run --backend llama \
            --device "$device" --drafter "$drafter" --turns 3 --db "$res/gpu.db" --json
    done
    ids=$("$py" -m specledger sessions --db "$res/gpu.db" --json 2>/dev/null | "$py" -c \
        'import json, sys; print(*(s["id"] for s in json.load(sys.stdin)))' 2>/dev/null)
    for id in $ids; do  # exit 1: an error-level finding, a result like any other
        step "postmortem_$id" 30 "$py" -m specledger postmortem "$id" --db "$res/gpu.db" --json
    done
}

# 1. four workers: every kernel variant compiles cold on the GPU (minutes in one process)
want pytest && step pytest 210 "$py" -m pytest -p no:cacheprovider -rs -n "$workers" \
    --dist loadfile \
    --device "$device" --junitxml="$res/pytest.xml" tests/speckernels \
    tests/engine/hybrid/test_backend.py tests/test_device_option.py
# 2.
if want kernels_gpu; then
    if [ "$device" = cuda ]; then
        step kernels_gpu 150 "$py" bench/kernels_gpu.py --fla-wheel .gpu/whl --budget-s 90 \
            --out "$res/kernels_gpu"
    else
        step kernels_gpu 150 "$py" bench/kernels_gpu.py --smoke-cpu --out "$res/kernels_gpu"
    fi
fi
# the llama steps once its server is there, the strategies while it builds
building() { [ -n "${build:-}" ] && kill -0 "$build" 2>/dev/null; }
if want llama && ! building; then llama_steps; fi
want strategies && step strategies 150 "$py" -m specledger bench strategies $quick \
    --device "$device" --out "$res/bench" --db "$res/bench/bench.db"
if want llama && [ ! -f "$res/calibration_llama.log" ]; then llama_steps; fi
want torch_speculative && step torch_speculative 90 "$py" bench/torch_speculative.py \
    --device "$device" $quick --prompts 8 --tokens 128 --out "$res/torch_speculative"
pack
