#!/usr/bin/env bash
# A real-GPU check of ringside's straggler verdicts (docs/gpu-check.md). On a machine with an NVIDIA
# GPU and PyTorch: starts an aggregator and an agent on loopback, runs a small multi-rank job with
# the NCCL plugin (several ranks on ONE GPU: each rank its own process and its own NCCL_HOSTID, so
# NCCL treats them as separate hosts and talks over loopback sockets), holds one rank back on the
# host and, in a later phase, one on the GPU, and prints what ringside concluded next to what was
# done. Everything it saw goes to --out. About a minute with 4 ranks; it gives up after --budget.
#
#   scripts/gpu-check.sh --out DIR [--bundle DIR] [--ranks N] [--steps N] [--python PY]
#
#   --bundle DIR   a folder made by scripts/gpu-bundle.sh (binaries run through its Debian loader);
#                  without it, the binaries of ./build (or $RINGSIDE_BUILD_DIR) run as they are
#   --out DIR      where the logs, the journal, the incidents and summary.txt go (created)
#   --ranks N      ranks (processes) on the one GPU: 4 (default) to 8
#   --steps N      steps per phase (default 200; 5 phases)
#   --host-rank R  the rank held back on the host (default 1); --gpu-rank R: on the GPU (default 2)
#   --python PY    the Python with torch (default python3)
#   --budget S     hard limit for the whole run in seconds (default 230)
#
# Exit: 0 ringside's verdicts match what was done; 1 they do not (see summary.txt); 2 it could not run.
set -uo pipefail

RANKS=4 STEPS=200 HOST_RANK=1 GPU_RANK=2 PY=python3 BUDGET=230 OUT="" BUNDLE=""
HOST_SLEEP_MS=10 GPU_MATMULS=4 GPU_DIM=8192
while (($#)); do
  case "$1" in
    --out) OUT="$2"; shift 2 ;;
    --bundle) BUNDLE="$2"; shift 2 ;;
    --ranks) RANKS="$2"; shift 2 ;;
    --steps) STEPS="$2"; shift 2 ;;
    --host-rank) HOST_RANK="$2"; shift 2 ;;
    --gpu-rank) GPU_RANK="$2"; shift 2 ;;
    --python) PY="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-check: $*" >&2; exit 2; }
[[ -n "$OUT" ]] || die "--out DIR is required"
[[ "$RANKS" =~ ^[0-9]+$ ]] && ((RANKS >= 3 && RANKS <= 8)) || die "--ranks must be 3 to 8"
((HOST_RANK < RANKS && GPU_RANK < RANKS && HOST_RANK != GPU_RANK)) || die "bad --host-rank/--gpu-rank"
mkdir -p "$OUT" || die "cannot make $OUT"
OUT="$(cd "$OUT" && pwd)"
START=$(date +%s)
left() { echo $((BUDGET - ($(date +%s) - START))); }
log() { echo "[gpu-check +$(($(date +%s) - START))s] $*" | tee -a "$OUT/gpu-check.log"; }

# --- binaries: a bundle through its loader, or the build tree as it is --------------------------
if [[ -n "$BUNDLE" ]]; then
  BUNDLE="$(cd "$BUNDLE" && pwd)" || die "no bundle at $BUNDLE"
  LD="$BUNDLE/lib/ld-linux-x86-64.so.2"
  [[ -x "$LD" ]] || die "$LD missing (make the bundle with scripts/gpu-bundle.sh)"
  run_bin() { local b="$1"; shift; "$LD" --library-path "$BUNDLE/lib" "$BUNDLE/bin/$b" "$@"; }
  PLUGIN="$BUNDLE/lib/libringside_nccl.so"
else
  BUILD="${RINGSIDE_BUILD_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build}"
  run_bin() { local b="$1"; shift; "$BUILD/daemon/$b" "$@"; }
  PLUGIN="$BUILD/collectors/nccl_plugin/libringside_nccl.so"
fi
[[ -f "$PLUGIN" ]] || die "no plugin at $PLUGIN"
run_bin ringside --help >/dev/null 2>&1 || die "the ringside CLI does not run (missing libraries?)"

# --- the machine ---------------------------------------------------------------------------------
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,pci.bus_id,driver_version \
  --format=csv,noheader >"$OUT/gpu.txt" 2>&1
"$PY" - >"$OUT/torch.txt" 2>&1 <<'EOF' || die "$PY cannot use torch with CUDA: $(tail -1 "$OUT/torch.txt")"
import torch
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
print("torch", torch.__version__, "nccl", ".".join(map(str, torch.cuda.nccl.version())),
      "gpu", torch.cuda.get_device_name(0))
EOF
log "$(cat "$OUT/torch.txt"); $(head -1 "$OUT/gpu.txt" 2>/dev/null)"
NVML=$(ldconfig -p 2>/dev/null | awk '/libnvidia-ml.so.1 / {print $NF; exit}')
for d in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu /usr/lib64; do
  [[ -z "$NVML" && -e "$d/libnvidia-ml.so.1" ]] && NVML="$d/libnvidia-ml.so.1"
done
log "NVML: ${NVML:-not found (the agent runs without GPU signals)}"

# --- ports, processes, cleanup -------------------------------------------------------------------
free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GRPC=$(free_port) HTTP=$(free_port) AGENT_HTTP=$(free_port) MASTER=$(free_port)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  sleep 0.5
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'log "interrupted"; exit 2' INT TERM
wait_http() {  # URL SECONDS
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$1" \
      >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

mkdir -p "$OUT/aggregator-state" "$OUT/run"
SOCK="$OUT/run/collectives.sock"
log "aggregator on 127.0.0.1:$GRPC (http $HTTP), state $OUT/aggregator-state"
run_bin ringside-aggregator --listen="127.0.0.1:$GRPC" --http-listen="127.0.0.1:$HTTP" \
  --state-dir="$OUT/aggregator-state" >"$OUT/aggregator.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$HTTP/metrics" 20 || die "the aggregator did not come up (aggregator.log)"
AGENT_ARGS=(--aggregator="127.0.0.1:$GRPC" --listen="127.0.0.1:$AGENT_HTTP" --node-name=gpu0
  --collectives-socket="$SOCK" --interval=1s --lldp=false)
[[ -n "$NVML" ]] && AGENT_ARGS+=(--nvml-library="$NVML")
log "agent on 127.0.0.1:$AGENT_HTTP, plugin socket $SOCK"
run_bin ringside-agent "${AGENT_ARGS[@]}" >"$OUT/agent.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$AGENT_HTTP/metrics" 20 || die "the agent did not come up (agent.log)"
for ((i = 0; i < 50; i++)); do [[ -S "$SOCK" ]] && break; sleep 0.1; done
[[ -S "$SOCK" ]] || die "the agent made no socket at $SOCK (agent.log)"

# --- the job -------------------------------------------------------------------------------------
cat >"$OUT/job.py" <<'EOF'
# One rank of the check's job: each step a small matmul, an all_reduce of 1 MiB and an .item()
# sync (like loss.item()). Phases of STEPS steps: warm, host (HOST_RANK sleeps before its step),
# rest, gpu (GPU_RANK queues big matmuls before its all_reduce), after. One collective per step,
# so the records' seq is the step. Rank 0 writes each step's start time (unix ns) to steps.txt.
import json, os, sys, time
import torch, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
steps, host_rank, gpu_rank = int(os.environ["STEPS"]), int(os.environ["HOST_RANK"]), int(os.environ["GPU_RANK"])
sleep_s, mm, dim = float(os.environ["HOST_SLEEP_MS"]) / 1e3, int(os.environ["GPU_MATMULS"]), int(os.environ["GPU_DIM"])
torch.cuda.set_device(0)
dev = torch.device("cuda", 0)
dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
x = torch.randn(512, 512, device=dev)
buf = torch.ones(256 * 1024, device=dev)  # 1 MiB of float32
big = torch.randn(dim, dim, device=dev, dtype=torch.bfloat16) if rank == gpu_rank else None
phases = ["warm", "host", "rest", "gpu", "after"]
times, out = {p: [] for p in phases}, []
for step in range(steps * len(phases)):
    phase = phases[step // steps]
    t0 = time.time()
    if rank == 0: out.append(time.time_ns())
    if phase == "host" and rank == host_rank: time.sleep(sleep_s)
    y = x @ x
    if phase == "gpu" and rank == gpu_rank:
        for _ in range(mm): big = big @ big; big = big / big.abs().amax().clamp(min=1)
    dist.all_reduce(buf)
    buf.mul_(1.0 / world)
    _ = float(y[0, 0].item()) + float(buf[0].item())
    times[phase].append(time.time() - t0)
dist.destroy_process_group()
res = {p: round(1e3 * sum(v) / max(1, len(v)), 2) for p, v in times.items()}
print("RESULT", json.dumps({"rank": rank, "mean_step_ms": res}), flush=True)
if rank == 0:
    with open(os.path.join(os.environ["OUT"], "steps.txt"), "w") as f:
        f.write("\n".join(map(str, out)) + "\n")
EOF
log "job: $RANKS ranks on GPU 0, $STEPS steps per phase (warm, host: rank $HOST_RANK sleeps ${HOST_SLEEP_MS} ms, rest, gpu: rank $GPU_RANK does $GPU_MATMULS ${GPU_DIM}^2 bf16 matmuls, after)"
JOB_PIDS=()
JOB_LIMIT=$(($(left) - 40))  # leave time to collect what ringside saw
((JOB_LIMIT >= 20)) || die "no time left for the job (--budget $BUDGET)"
for ((r = 0; r < RANKS; r++)); do
  env RANK=$r WORLD_SIZE=$RANKS LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$MASTER \
    NCCL_HOSTID="host$r" NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,PROFILER NCCL_PROFILER_PLUGIN="$PLUGIN" RINGSIDE_SOCKET="$SOCK" \
    RINGSIDE_JOB_ID=gpu-check POD_NAME="trainer-$r" POD_NAMESPACE=ml OUT="$OUT" \
    STEPS=$STEPS HOST_RANK=$HOST_RANK GPU_RANK=$GPU_RANK HOST_SLEEP_MS=$HOST_SLEEP_MS \
    GPU_MATMULS=$GPU_MATMULS GPU_DIM=$GPU_DIM \
    timeout -k 5 "$JOB_LIMIT" "$PY" "$OUT/job.py" >"$OUT/rank$r.log" 2>&1 &
  JOB_PIDS+=($!)
  PIDS+=($!)
done
JOB_OK=1
for p in "${JOB_PIDS[@]}"; do wait "$p" || JOB_OK=0; done
grep -h '^RESULT' "$OUT"/rank*.log >"$OUT/job-results.txt" 2>/dev/null
grep -h 'PROFILER/Plugin' "$OUT"/rank*.log | head -"$RANKS" >"$OUT/plugin-lines.txt" 2>/dev/null
((JOB_OK)) || log "the job failed or timed out (rank*.log); what ringside saw is still collected"
log "job done; plugin: $(head -1 "$OUT/plugin-lines.txt" 2>/dev/null | sed 's/.*PROFILER/PROFILER/')"

# --- what ringside concluded ---------------------------------------------------------------------
sleep 3  # the plugin flushes, the agent uploads, the aggregator judges
CLI=(--aggregator="127.0.0.1:$GRPC")
run_bin ringside incidents "${CLI[@]}" -o json >"$OUT/incidents.json" 2>"$OUT/cli.err"
run_bin ringside stragglers "${CLI[@]}" --job gpu-check -o json >"$OUT/stragglers.json" 2>>"$OUT/cli.err"
run_bin ringside stragglers "${CLI[@]}" --job gpu-check >"$OUT/stragglers.txt" 2>>"$OUT/cli.err"
"$PY" -c "import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(sys.argv[1]).read().decode())" \
  "http://127.0.0.1:$AGENT_HTTP/metrics" >"$OUT/agent-metrics.txt" 2>/dev/null
kill "${PIDS[1]}" "${PIDS[0]}" 2>/dev/null  # agent, then aggregator
wait "${PIDS[1]}" "${PIDS[0]}" 2>/dev/null
run_bin ringside-aggregator --dump-journal --state-dir="$OUT/aggregator-state" \
  >"$OUT/journal.jsonl" 2>"$OUT/dump-journal.err"
gzip -kf "$OUT/journal.jsonl"
run_bin ringside import-trace --format=ringside-journal --analyze -o json "$OUT/journal.jsonl" \
  >"$OUT/replay.json" 2>"$OUT/replay.err"
log "journal: $(grep -c '"kind":"collective"' "$OUT/journal.jsonl") collective records"

"$PY" - "$OUT" "$STEPS" "$HOST_RANK" "$GPU_RANK" "$RANKS" <<'EOF' | tee "$OUT/summary.txt"
import bisect, json, os, sys
out, steps, host_rank, gpu_rank, ranks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
phases = ["warm", "host", "rest", "gpu", "after"]
did = {"warm": "nobody held back", "host": f"rank {host_rank} sleeps on the host before each step",
       "rest": "nobody held back", "gpu": f"rank {gpu_rank} queues extra GPU work before its all_reduce",
       "after": "nobody held back"}
expect = {"host": (host_rank, "host"), "gpu": (gpu_rank, "gpu")}
def load(name, default):
    try:
        with open(os.path.join(out, name)) as f: return json.load(f)
    except Exception: return default
step_ns = []
try: step_ns = [int(l) for l in open(os.path.join(out, "steps.txt")) if l.strip()]
except Exception: pass
def phase_of_seq(seq):
    return phases[min(len(phases) - 1, max(0, seq // steps))] if seq is not None and seq >= 0 else "?"
def seq_of_time(iso):  # live incidents carry times (RFC 3339); the job logged each step's start
    if not iso or not step_ns: return None
    from datetime import datetime, timezone
    main, _, frac = iso.rstrip("Z").partition(".")
    t = datetime.strptime(main[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    ns = int(t.timestamp()) * 10**9 + int((frac + "000000000")[:9] if frac else 0)
    return max(0, bisect.bisect_right(step_ns, ns) - 1)
replay = [i for i in load("replay.json", []) if i.get("kind") == "straggler"]
live = [i for i in load("incidents.json", []) if i.get("kind") == "straggler"]
results = open(os.path.join(out, "job-results.txt")).read().splitlines() if os.path.exists(os.path.join(out, "job-results.txt")) else []
print("ringside gpu-check:", open(os.path.join(out, "torch.txt")).read().strip())
for l in results[:1]:
    mean = json.loads(l.split(" ", 1)[1])["mean_step_ms"]
    print("rank 0 mean step (ms) by phase:", mean)
    # A held rank that did not slow the job (with many ranks on one GPU the shared GPU absorbs a
    # host sleep) held nobody back: then "no straggler" is the right answer for its phase.
    quiet = (mean.get("warm", 0) + mean.get("rest", 0)) / 2
    for p in ("host", "gpu"):
        if quiet > 0 and mean.get(p, 0) < 1.05 * quiet:
            print(f"{p} phase: the job did not slow ({mean.get(p)} ms against {quiet:.2f}): no straggler expected")
            expect.pop(p, None)
print()
print(f"{'PHASE':6} {'SEQ':9} {'WHAT WAS DONE':52} WHAT RINGSIDE CONCLUDED (replay of the journal | live)")
ok = True
for p_i, p in enumerate(phases):
    lo, hi = p_i * steps, (p_i + 1) * steps - 1
    opened_r = [i for i in replay if phase_of_seq(i.get("opened_seq")) == p]
    opened_l = [i for i in live if phase_of_seq(seq_of_time(i.get("opened"))) == p]
    fmt = lambda i, seq: f"rank {i.get('rank', i.get('entity', {}).get('rank'))} where={i.get('where', '?')} opened@{seq}"
    r_txt = ", ".join(fmt(i, i.get("opened_seq")) for i in opened_r) or "no straggler"
    l_txt = ", ".join(fmt(i, seq_of_time(i.get("opened"))) for i in opened_l) or "no straggler"
    print(f"{p:6} {lo:>4}-{hi:<4} {did[p]:52} {r_txt} | {l_txt}")
    want = expect.get(p)
    got = [(int(i.get("rank", -1)), i.get("where")) for i in opened_r]
    if want is None:
        if got: ok = False; print(f"       MISMATCH: nobody was held back, ringside raised {got}")
    elif got != [want]:
        ok = False; print(f"       MISMATCH: expected rank {want[0]} where={want[1]}, got {got or 'nothing'}")
    else:  # and it must resolve within about a window (20 instances) of the phase's end
        rs = opened_r[0].get("resolved_seq")
        if rs is None or rs > hi + 1 + 40:
            ok = False; print(f"       MISMATCH: rank {want[0]} resolved at seq {rs}, phase ended at {hi}")
for i in replay:
    rs = i.get("resolved_seq")
    print(f"replay: rank {i.get('rank')} ({i.get('where')}) opened at seq {i.get('opened_seq')} "
          f"({phase_of_seq(i.get('opened_seq'))}), resolved at seq {rs} ({phase_of_seq(rs) if rs is not None else 'still open'})")
print()
print("VERDICT:", "ringside's verdicts match what was done" if ok else "MISMATCH (see above)")
sys.exit(0 if ok else 1)
EOF
RC=${PIPESTATUS[0]}
log "done in $(($(date +%s) - START)) s; results in $OUT (summary.txt, replay.json, incidents.json, journal.jsonl.gz)"
exit "$RC"
