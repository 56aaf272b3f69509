#!/bin/sh
# Every GPU check and benchmark, as the one prepared command a session lent an H200 runs
# (device tool, from the repo root there, carry [".whl"] filled by tools/gpu_wheels.sh):
#
#   sh bench/gpu_session.sh        timeout_s 600; results come back as $OUT/results.tgz
#
# Issue 5: the Triton kernels against their torch references and timed (bench/kernels_gpu.py).
# Issue 6: the sim calibrated to the real engine on CUDA, and the rollback strategies with
# absolute times (specledger bench calibration strategies --device cuda).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH="/tmp/site:$PWD" PYTHONUNBUFFERED=1
mkdir -p /tmp/res
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > /tmp/res/gpu.csv
timeout 200 python3 bench/kernels_gpu.py --fla-wheel .whl --out /tmp/res/kernels_gpu \
    > /tmp/res/kernels.log 2>&1
echo "kernels_gpu exit $?" >> /tmp/res/status.txt
timeout 330 python3 -m specledger bench calibration strategies --device cuda \
    --out /tmp/res/bench --db /tmp/res/bench.db > /tmp/res/bench.log 2>&1
echo "bench exit $?" >> /tmp/res/status.txt
rm -f /tmp/res/bench.db*
tar czf "$OUT/results.tgz" -C /tmp/res .
cat /tmp/res/status.txt; tail -5 /tmp/res/kernels.log /tmp/res/bench.log
