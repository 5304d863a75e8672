#!/bin/sh
# Measures how far `tpu-rewrite run` passes its memory budget: every input
# in examples/ and tests/ (.opg, .pbtxt, .pb) and, when seeded, the fuzz
# corpora runs under `--max-memory BUDGET` (default 32M, tight: about the
# binary's own resident set plus a little) with its peak resident set
# measured by GNU time (wait4's ru_maxrss). A TF corpus graph is fed the
# feeds its `.json` beside it records (converted with python3), so it runs
# rather than stopping at a missing feed. Prints one line per input and
# the largest peak minus the budget. Run from the repository root after
# `cargo build`: sh fuzz/budget-overshoot.sh [BUDGET]
set -u
budget=${1:-32M}
bin=${TPU_REWRITE_BIN:-target/debug/tpu-rewrite}
bytes=$(numfmt --from=iec "$budget")
worst=0
worst_file=none
count=0
list=$(find examples tests fuzz/corpus -type f \( -name '*.opg' -o -name '*.pbtxt' -o -name '*.pb' \) 2>/dev/null | sort)
feeds=$(mktemp)
trap 'rm -f "$feeds"' EXIT
for f in $list; do
    set -- run "$f" --max-memory "$budget" --timeout 5
    meta="${f%.*}.json"
    if [ -f "$meta" ] && python3 - "$meta" "$feeds" <<'PY'
import json, sys
feeds = json.load(open(sys.argv[1])).get("feeds") or sys.exit(1)
def nest(values, shape):
    if not shape:
        return values[0]
    step = len(values) // shape[0] if shape[0] else 0
    return [nest(values[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
out = {k: nest(v["values"], v["shape"]) for k, v in feeds.items() if isinstance(v, dict) and "values" in v}
json.dump(out, open(sys.argv[2], "w"))
PY
    then
        set -- "$@" --feeds "$feeds"
    fi
    out=$(NO_COLOR=1 timeout 60 /usr/bin/time -f 'peak_kb=%M' "$bin" "$@" 2>&1 >/dev/null)
    status=$?
    peak_kb=$(printf '%s\n' "$out" | sed -n 's/^peak_kb=//p' | tail -n 1)
    [ -n "$peak_kb" ] || continue
    count=$((count + 1))
    over=$((peak_kb * 1024 - bytes))
    code=$(printf '%s\n' "$out" | grep -o 'tpu_rewrite::[a-z_:]*' | head -n 1)
    echo "$f exit=$status peak=$((peak_kb / 1024))MiB over=$((over / 1048576))MiB ${code:-}"
    if [ "$over" -gt "$worst" ]; then
        worst=$over
        worst_file=$f
    fi
done
echo "inputs: $count; budget $budget ($bytes bytes); largest peak over the budget: $worst bytes ($((worst / 1048576)) MiB), $worst_file"
