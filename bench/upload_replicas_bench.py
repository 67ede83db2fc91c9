#!/usr/bin/env python3
"""ringside-agent's CPU streaming to one aggregator against two replicas (issue #14: at most 1.5x).

Writes a DGX-class sysfs tree (ringside-agent-bench --tree), starts two real ringside-aggregator
processes on 127.0.0.1, then runs the real ringside-agent on the tree for --seconds at --interval,
alternately with --aggregator=A and with --aggregator=A,B, --rounds times, and reads each run's
CPU (user + system) from the kernel's rusage of the finished child. Prints every run, the medians
and their ratio. Every loop is bounded; the only traffic is to 127.0.0.1.

  bench/upload_replicas_bench.py [--build=build] [--seconds=20] [--rounds=3] [--interval=100ms]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def start_aggregator(build, work, name):
    state = os.path.join(work, name)
    p = subprocess.Popen(
        [os.path.join(build, "daemon/ringside-aggregator"), "--listen=127.0.0.1:0",
         "--http-listen=", "--state-dir=" + state],
        stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    seen = ""
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            break
        seen += line
        m = re.search(r"ingest \(gRPC\) listening on \S+ \(port ([0-9]+)\)", line)
        if m:
            return p, m.group(1)
    p.kill()
    sys.exit("aggregator %s did not start:\n%s" % (name, seen))


def run_agent(build, tree, targets, seconds, interval):
    argv = [os.path.join(build, "daemon/ringside-agent"), "--sysfs-root=" + tree,
            "--node-name=bench-node", "--aggregator=" + targets, "--interval=" + interval,
            "--duration=%ds" % seconds, "--listen=", "--nvml-library=", "--ethtool-source=off",
            "--link-events=false", "--collectives-socket="]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit("agent exited with status %d: %s" % (status, " ".join(argv)))
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval", default="100ms")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ringside-replicas-bench-")
    aggs = []
    try:
        tree = os.path.join(work, "tree")
        subprocess.run(
            [os.path.join(a.build, "bench/ringside-agent-bench"), "--tree=" + tree, "--cycles=1",
             "--scrapes=1", "--duration=100ms", "--node-exporter=", "--nvlink-ethtool=false",
             "--rounds=1", "--lean-variant=false"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        pa, port_a = start_aggregator(a.build, work, "a")
        aggs.append(pa)
        pb, port_b = start_aggregator(a.build, work, "b")
        aggs.append(pb)
        one = "127.0.0.1:" + port_a
        two = one + ",127.0.0.1:" + port_b
        single, double = [], []
        for r in range(a.rounds):
            s = run_agent(a.build, tree, one, a.seconds, a.interval)
            d = run_agent(a.build, tree, two, a.seconds, a.interval)
            single.append(s)
            double.append(d)
            print("round %d: one aggregator %.2f s CPU, two replicas %.2f s CPU, ratio %.2f"
                  % (r + 1, s, d, d / s), flush=True)
        ms, md = statistics.median(single), statistics.median(double)
        print("median over %d rounds of %d s at %s: one %.2f s, two %.2f s CPU; two/one = %.2f "
              "(goal <= 1.5)" % (a.rounds, a.seconds, a.interval, ms, md, md / ms))
    finally:
        for p in aggs:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
