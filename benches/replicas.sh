#!/usr/bin/env bash
# Lowering cost against the replica count (the SPMD form: one program per
# cluster and logical core, whatever the replica count).
#
# For `gen --ops 20000` at 8, 64, 256 and 1024 replicas, and for
# `gen --ops 1000000` at 8 and 1024, prints the wall time, peak RSS and
# output size of `lower`, each with its ratio to the 8-replica figure.
# Then runs the generated MLP at 8 and 256 replicas (`--topology 32x8`,
# feeds from a JSON file) and prints time and peak RSS.
#
# Usage: benches/replicas.sh [--quick]   (--quick: skip the 1M-op rows)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/tpu-rewrite
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# measure LABEL CMD... : prints "LABEL wall_s rss_kb".
measure() {
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  echo "$label $(cat "$work/time")"
}

row() { # ops replicas topology
  local ops=$1 r=$2 topo=$3
  "$bin" gen --ops "$ops" --replicas "$r" -o "$work/g.opg"
  read -r _ wall rss < <(measure x "$bin" lower "$work/g.opg" --topology "$topo" -o "$work/l.opg")
  local size
  size=$(stat -c %s "$work/l.opg")
  echo "$ops $r $topo $wall $rss $size"
}

report() { # rows on stdin; the first row is the base
  awk 'NR == 1 { w = $4; m = $5; s = $6 }
       { printf "%8d ops %5d replicas %-7s %7.2f s (%.2fx) %8.1f MB RSS (%.2fx) %9.1f MB out (%.2fx)\n",
                $1, $2, $3, $4, $4 / w, $5 / 1024, $5 / m, $6 / 1e6, $6 / s }'
}

echo "== lower, gen --ops 20000 ($(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
{ row 20000 8 1x8; row 20000 64 8x8; row 20000 256 32x8; row 20000 1024 128x8; } | report
if [ "${1:-}" != "--quick" ]; then
  echo "== lower, gen --ops 1000000"
  { row 1000000 8 1x8; row 1000000 1024 128x8; } | report
fi

echo "== run, gen --ops 2000 MLP, one step, feeds from a file"
for pair in "8 1x8" "256 32x8"; do
  set -- $pair
  "$bin" gen --ops 2000 --replicas "$1" -o "$work/m.opg"
  python3 - "$1" "$work/feeds.json" <<'PY'
import json, random, sys
n, path = int(sys.argv[1]), sys.argv[2]
feeds = {}
for r in range(n):
    rng = random.Random(r)
    feeds[f"x{r}"] = [[rng.uniform(-1, 1) for _ in range(16)] for _ in range(8)]
    feeds[f"y{r}"] = [[rng.uniform(-1, 1) for _ in range(16)] for _ in range(8)]
json.dump(feeds, open(path, "w"))
PY
  read -r _ wall rss < <(measure x "$bin" run "$work/m.opg" --topology "$2" --feeds "$work/feeds.json" --steps 1 --json)
  printf "%5d replicas %-6s %6.2f s %8.1f MB RSS\n" "$1" "$2" "$wall" "$(echo "$rss / 1024" | bc -l)"
done
