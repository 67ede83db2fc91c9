#!/bin/bash
# Subnet discovery's cost on a simulated fabric: starts ibsim on a net file (default: the test's
# 2-spine, 4-leaf, 16-HCA fat tree) with OpenSM as its SM, runs `ringside-fabric-scan --discover`
# PASSES times under ibsim-run at RATE SMPs/s (0: unpaced), and prints SMPs, wall time and CPU
# per pass (min / median / max). Needs Debian's ibsim-utils, libumad2sim0, opensm.
#
#   bench/ibsim_discovery_bench.sh BUILD_DIR [PASSES=20] [RATE=0] [NET_FILE]
#
# CPU is the discovering process's (getrusage, user+system) during each pass; under ibsim it
# includes libumad2sim's socket round trip per MAD, which a real umad device does not have.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [PASSES] [RATE] [NET_FILE]}
passes=${2:-20}
rate=${3:-0}
src=$(cd "$(dirname "$0")/.." && pwd)
net=${4:-$src/tests/data/ibsim/fat_tree_2spine_4leaf_16hca.net}
tool=$(cd "$build" && pwd)/collectors/ringside-fabric-scan
dir=$(mktemp -d)
export IBSIM_SOCKNAME=ringside-bench-$$ OSM_TMP_DIR=$dir OSM_CACHE_DIR=$dir
cd "$dir"
mkfifo console
ibsim -s "$net" < console > ibsim.out 2>&1 &
ibsim_pid=$!
exec 3> console  # keeps ibsim's console open
cleanup() {
  [ -n "${osm_pid:-}" ] && kill "$osm_pid" 2>/dev/null || true
  echo Quit >&3 || true
  sleep 0.2
  kill "$ibsim_pid" 2>/dev/null || true
  cd / && rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q 'sim>' ibsim.out && break; sleep 0.1; done
echo "force_log_flush TRUE" > osm.conf
ibsim-run opensm -F osm.conf -s 0 -f "$dir/osm.log" > osm.out 2>&1 &
osm_pid=$!
for _ in $(seq 300); do grep -q 'SUBNET UP' osm.log 2>/dev/null && break; sleep 0.1; done
grep -q 'SUBNET UP' osm.log || { echo "OpenSM did not bring the subnet up" >&2; exit 1; }
ibsim-run "$tool" --discover --rate="$rate" --scans="$passes" --interval-ms=0 2> scan.err |
  grep "^discovery " > passes.txt || { cat scan.err ibsim.out >&2; true; }
python3 - "$dir/passes.txt" "$rate" <<'PY'
import statistics, sys
rows = [dict(kv.split("=", 1) for kv in l.split()[3:]) for l in open(sys.argv[1]) if l.strip()]
if not rows:
    sys.exit("no passes")
def col(k): return sorted(float(r[k]) for r in rows)
for k, unit in (("mads", "SMPs"), ("duration_ms", "ms wall"), ("cpu_ms", "ms CPU")):
    v = col(k)
    print(f"{k:12s} min {v[0]:9.3f}  median {statistics.median(v):9.3f}  max {v[-1]:9.3f}  ({unit})")
r0 = rows[0]
print(f"passes {len(rows)} at --rate={sys.argv[2]}: nodes={r0['nodes']} links={r0['links']} "
      f"complete={'/'.join(sorted(set(r['complete'] for r in rows)))} "
      f"errors={sum(int(r['errors']) for r in rows)}")
mads, cpu = col("mads"), col("cpu_ms")
print(f"CPU per SMP (median): {statistics.median(cpu) / statistics.median(mads) * 1000:.1f} us")
PY
