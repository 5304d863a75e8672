#!/bin/sh
# Measures how far `tpu-rewrite run` passes its memory budget: every input
# in examples/ and tests/ (.opg, .pbtxt, .pb) and, when seeded, the fuzz
# corpora runs under `--max-memory BUDGET` (default 32M, tight: about the
# binary's own resident set plus a little) with its peak resident set
# measured by GNU time (wait4's ru_maxrss). Prints one line per input that
# ran or stopped, and the largest peak minus the budget. Run from the
# repository root after `cargo build`: sh fuzz/budget-overshoot.sh [BUDGET]
set -u
budget=${1:-32M}
bin=${TPU_REWRITE_BIN:-target/debug/tpu-rewrite}
bytes=$(numfmt --from=iec "$budget")
worst=0
worst_file=none
count=0
list=$(find examples tests fuzz/corpus -type f \( -name '*.opg' -o -name '*.pbtxt' -o -name '*.pb' \) 2>/dev/null | sort)
for f in $list; do
    out=$(NO_COLOR=1 timeout 60 /usr/bin/time -f 'peak_kb=%M' "$bin" run "$f" --max-memory "$budget" --timeout 5 2>&1 >/dev/null)
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
