#!/usr/bin/env bash
# Speed and memory at scale (issue 17): prints each row of the goal table
# with our figure next to the goal, and TensorFlow 2.21's own GraphDef ->
# MLIR import of the same transformer `.pb` in the same run.
#
# Each figure is the median of RUNS runs (default 3) of the whole command:
# wall time, CPU time (user + sys) and peak RSS, from /usr/bin/time, each
# the median of its own column. The
# machine is shared, so the load average is printed with each section; CPU
# time moves less with the load than wall time does.
#
# Usage: benches/scale.sh [--quick]
#   --quick            skip the rows that need 1M-op inputs (about a minute)
#   TF_PYTHON=path     a python with tensorflow-cpu 2.21.0 (default: the venv
#                      tests/tf/.venv, made by tests/tf/setup.sh when missing)
#   RUNS=n             runs per figure (default 3)
#   TF_TRANSFORMER=f   the TF-made transformer .pb (default:
#                      ~/.cache/tpu-rewrite/bench-models/tf_transformer.pb,
#                      made by benches/tf_transformer.py when missing)
#   CARGO_TARGET_DIR   where the release build goes (default: target/)
#   KEEP=dir           generate inputs into dir and keep them (default: a
#                      temporary directory, removed at exit; 1M inputs take
#                      80-130 MB each)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=no
[ "${1:-}" = "--quick" ] && quick=yes
runs=${RUNS:-3}
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/tpu-rewrite
if [ -n "${KEEP:-}" ]; then
  work=$KEEP
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

load() { cut -d' ' -f1 /proc/loadavg; }
machine() { echo "$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load $(load)"; }

# medians: reads lines of numbers, prints each column's own median.
medians() {
  awk -v n="$runs" '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF }
    END {
      for (i = 1; i <= nf; i++) {
        for (j = 1; j <= NR; j++) s[j] = v[i, j] + 0
        # insertion sort: a handful of runs
        for (j = 2; j <= NR; j++) { x = s[j]; k = j - 1; while (k >= 1 && s[k] > x) { s[k + 1] = s[k]; k-- } s[k + 1] = x }
        printf "%s%s", s[int((NR + 1) / 2)], (i < nf ? " " : "\n")
      }
    }'
}

# measure CMD... : runs CMD $runs times, prints the median "wall cpu rss_kb" (each its own median).
measure() {
  local i
  for ((i = 0; i < runs; i++)); do
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || {
      cat "$work/err" >&2
      exit 1
    }
    awk '{ printf "%.2f %.2f %d\n", $1, $2 + $3, $4 }' "$work/time"
  done | medians
}

# gen_once NAME ARGS... : generates $work/NAME unless it is there.
gen_once() {
  local name=$1
  shift
  [ -s "$work/$name" ] || "$bin" gen "$@" -o "$work/$name"
}

# row LABEL "OURS" "GOAL" VERDICT
row() { printf '%-58s | %-40s | %-22s | %s\n' "$1" "$2" "$3" "$4"; }
verdict() { awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 <= b + 0) ? "met" : "not met" }'; }
per_op() { awk -v kb="$1" -v n="$2" 'BEGIN { printf "%.0f", kb * 1024 / n }'; }

tf_python() {
  if [ -n "${TF_PYTHON:-}" ]; then
    echo "$TF_PYTHON"
  else
    bash tests/tf/setup.sh >&2
    echo "$PWD/tests/tf/.venv/bin/python"
  fi
}

echo "# benches/scale.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(machine), RUNS=$runs"
echo "# each figure: median wall s / CPU s (user+sys) / peak RSS of the whole command"
row "work" "ours" "goal" "verdict"
row "----" "----" "----" "-------"

# 1. The 88k-node transformer: our whole `lower` against TF's import.
gen_once t88k.pb --model transformer --ops 88000 --format pb
read -r w c m < <(measure "$bin" lower "$work/t88k.pb" --topology 2x4 -o /dev/null)
py=$(tf_python)
tf_runs=$("$py" benches/tf_import.py "$work/t88k.pb" "$runs" 2>"$work/tf.err") || { cat "$work/tf.err" >&2; exit 1; }
read -r tw tc _ < <(echo "$tf_runs" | medians)
ratio=$(awk -v a="$tw" -v b="$w" 'BEGIN { printf "%.1f", a / b }')
cratio=$(awk -v a="$tc" -v b="$c" 'BEGIN { printf "%.1f", a / b }')
row "88k transformer .pb: lower --topology 2x4 vs TF import" "${w} s / ${c} s CPU vs TF ${tw} s / ${tc} s CPU" ">= 25x faster" \
  "${ratio}x wall, ${cratio}x CPU: $(awk -v r="$ratio" 'BEGIN { print (r >= 25) ? "met" : "not met" }')"

# 1b. A transformer TensorFlow 2.21 made under tpu.replicate (benches/tf_transformer.py: 170
# layers, about 88k nodes, 18.6 MB), generated once into the cache directory ($TF_TRANSFORMER).
tfpb=${TF_TRANSFORMER:-$HOME/.cache/tpu-rewrite/bench-models/tf_transformer.pb}
if [ ! -s "$tfpb" ]; then
  [ -n "${py:-}" ] || py=$(tf_python)
  "$py" benches/tf_transformer.py "$tfpb" >/dev/null 2>"$work/tf.err" || { cat "$work/tf.err" >&2; exit 1; }
fi
read -r w c m < <(measure "$bin" lower "$tfpb" --topology 2x4 -o /dev/null)
tf_runs=$("$py" benches/tf_import.py "$tfpb" "$runs" 2>"$work/tf.err") || { cat "$work/tf.err" >&2; exit 1; }
read -r tw tc _ < <(echo "$tf_runs" | medians)
cratio=$(awk -v a="$tc" -v b="$c" 'BEGIN { printf "%.1f", a / b }')
row "TF-made transformer .pb: lower --topology 2x4 vs TF import" "${w} s / ${c} s CPU vs TF ${tw} s / ${tc} s CPU" \
  ">= 25x faster (CPU)" "${cratio}x CPU: $(awk -v r="$cratio" 'BEGIN { print (r >= 25) ? "met" : "not met" }')"
# Its load phase (read, decode, build the IR) from `--time-passes`: median wall and CPU ms.
for ((i = 0; i < runs; i++)); do
  "$bin" lower "$tfpb" --topology 2x4 --time-passes -o /dev/null 2>&1 >/dev/null | awk '$1 == "load" { print $2, $5 }'
done | medians >"$work/load"
read -r lw lc <"$work/load"
mbs=$(awk -v b="$(stat -c %s "$tfpb")" -v ms="$lw" 'BEGIN { printf "%.0f", b / 1e6 / (ms / 1e3) }')
cmbs=$(awk -v b="$(stat -c %s "$tfpb")" -v ms="$lc" 'BEGIN { printf "%.0f", b / 1e6 / (ms / 1e3) }')
row "  its load phase (lower --time-passes)" "${lw} ms wall / ${lc} ms CPU = ${mbs} MB/s wall, ${cmbs} MB/s CPU" \
  ">= 300 MB/s" "$(awk -v r="$mbs" 'BEGIN { print (r >= 300) ? "met" : "not met" }') (wall)"

# 2-4. The transformer at 100k and 1M ops, lower --topology 1x8.
gen_once t100k.pb --model transformer --ops 100000 --format pb
read -r w1 c1 m1 < <(measure "$bin" lower "$work/t100k.pb" --topology 1x8 -o /dev/null)
row "transformer 100k .pb: lower --topology 1x8 -o /dev/null" "${w1} s / ${c1} s CPU, $((m1 / 1024)) MB" "-" "-"
if [ $quick = no ]; then
  gen_once t1m.pb --model transformer --ops 1000000 --format pb
  read -r w2 c2 m2 < <(measure "$bin" lower "$work/t1m.pb" --topology 1x8 -o /dev/null)
  rm -f "$work/t1m.pb"
  row "transformer 1M .pb (127 MB): lower --topology 1x8" "${w2} s / ${c2} s CPU" "<= 2.5 s" "$(verdict "$w2" 2.5)"
  g=$(awk -v a="$w2" -v b="$w1" 'BEGIN { printf "%.2f", a / b / 10 }')
  gc=$(awk -v a="$c2" -v b="$c1" 'BEGIN { printf "%.2f", a / b / 10 }')
  # The goal is on the command's time (wall). CPU time adds the second
  # core's work (the decoding thread, parallel printing) to the main one's.
  row "  time per op, 1M vs 100k" "${g}x wall, ${gc}x CPU" "<= 1.3x" "$(verdict "$g" 1.3) (wall)"
  b=$(per_op "$m2" 1000000)
  row "  peak memory" "$((m2 / 1024)) MB = $b B/op" "<= 1000 B/op" "$(verdict "$b" 1000)"
fi

# 5. The default MLP model, lower --topology 1x8.
echo "# load $(load)"
sizes="100000 300000"
[ $quick = no ] && sizes="$sizes 1000000"
for n in $sizes; do
  gen_once "mlp$n.opg" --ops "$n"
  read -r w c m < <(measure "$bin" lower "$work/mlp$n.opg" --topology 1x8 -o /dev/null)
  b=$(per_op "$m" "$n")
  [ "$n" = 100000 ] && base_cpu=$c
  lin=$(awk -v c="$c" -v b="$base_cpu" -v n="$n" 'BEGIN { printf "%.2f", c / b / (n / 100000) }')
  if [ "$n" = 1000000 ]; then
    ok="$(verdict "$w" 2.5) (time), $(verdict "$b" 1000) (memory); CPU per op ${lin}x the 100k row's"
    goal="<= 2.5 s, <= 1000 B/op"
  else
    ok="CPU per op ${lin}x the 100k row's"
    goal="linear"
  fi
  row "gen --ops $n (MLP): lower --topology 1x8" "${w} s / ${c} s CPU, $((m / 1024)) MB = $b B/op" "$goal" "$ok"
done

# 6. check of the 1M-op MLP text.
if [ $quick = no ]; then
  read -r w c m < <(measure "$bin" check "$work/mlp1000000.opg")
  b=$(per_op "$m" 1000000)
  row "check of gen --ops 1000000 (.opg, 80 MB)" "${w} s / ${c} s CPU, $b B/op" "<= 1.5 s, <= 400 B/op" \
    "$(verdict "$w" 1.5) (time), $(verdict "$b" 400) (memory)"
  rm -f "$work/mlp1000000.opg"
fi
echo "# done, load $(load)"
