#!/bin/sh
# gpu_results.sh RESULTS.tgz DEST: what bench/gpu_session.sh brought back, unpacked into DEST
# and read here (docs/gpu.md): each recorded llama-server log imported again from the file
# alone (as a user's own log would be) and postmortemed, and a profile fitted with
# `specledger calibrate` from the recommended calibration log (the recipe's draft-mtp server,
# `calibrate --help`), then `whatif` of an imported session on it. The outputs land in
# DEST/here/; DEST/summary.txt is the session's own account.
# Environment: PYTHON (default .venv/bin/python).
set -eu
[ $# -eq 2 ] || { echo "usage: sh tools/gpu_results.sh RESULTS.tgz DEST" >&2; exit 2; }
tgz=$1 dest=$2
py=${PYTHON:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
mkdir -p "$dest/here"
tar -xzf "$tgz" -C "$dest"
here="$dest/here"
db="$here/imported.db"
rm -f "$db"
cat "$dest/summary.txt"

for log in "$dest"/runs/*.log; do
    [ -f "$log" ] || continue
    name=$(basename "$log" .log)
    "$py" -m specledger import llama-server "$log" --responses "${log%.log}.responses.json" \
        --db "$db" --json >"$here/import-$name.json"
    id=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1]))["session"])' \
        "$here/import-$name.json")
    "$py" -m specledger postmortem "$id" --db "$db" >"$here/postmortem-$id.txt" || true
    echo "imported $name as session $id: $(head -1 "$here/postmortem-$id.txt")"
done

# the recipe's first run (the held-out check's own fits, of its median run, are in
# calibration_llama/logs.md)
fit=$(ls "$dest"/calibration_logs/*/mtp-k8-p0.4-*.log 2>/dev/null | head -1)
if [ -n "$fit" ]; then
    "$py" -m specledger calibrate "$fit" --out "$here/profile.json" | tee "$here/calibrate.txt"
    last=$("$py" -m specledger sessions --db "$db" --json | "$py" -c \
        'import json, sys; print(json.load(sys.stdin)[-1]["id"])')
    "$py" -m specledger whatif "$last" --profile "$here/profile.json" --db "$db" \
        | tee "$here/whatif.txt"
else
    echo "no calibration log came back: nothing to fit"
fi
