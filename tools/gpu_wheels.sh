#!/bin/sh
# The wheels the H200 image lacks (its Python is 3.12): the event log's SQLAlchemy, the
# round machine's transitions (and six), the graphviz bindings, and fla + einops for
# the kernel comparison. Run here, in the repo root; they land in .whl/ (git-ignored), the
# folder `bench/gpu_session.sh` installs from on the device.
set -eu
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
PY=${PYTHON:-.venv/bin/python}
for spec in SQLAlchemy==2.1.9 transitions==0.9.3 graphviz==0.21 \
            fla-core==0.5.2 einops==0.8.2 six==1.17.0; do
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d .whl "$spec"
done
ls .whl
