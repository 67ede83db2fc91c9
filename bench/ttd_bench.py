#!/usr/bin/env python3
"""ringside-ttd-bench: fault -> page, ringside against Prometheus + node_exporter (issue #15 item 5).

Runs, side by side in one network namespace the bench creates (so 127.0.0.1 is the namespace's own
loopback and /sys shows its veths only):
  - ringside at two sampling intervals (1s and 100ms): one real ringside-aggregator per interval
    with --alertmanager-url pointing at this bench, and one real ringside-agent per interval
    (--sysfs-root=<generated tree>, --link-events=true, node name rs-1s / rs-100ms);
  - Prometheus (Debian's /usr/bin/prometheus) at 1s/1s and at 15s/15s scrape/evaluation, both
    scraping two node_exporters (Debian's prometheus-node-exporter): one with --collector.netclass
    on the namespace's /sys, one with --collector.infiniband on the generated tree; alert rules with
    `for: 0s`; alerting.alertmanagers points at this bench;
  - one Alertmanager-v2-compatible receiver (POST /api/v2/alerts) served by this bench, which
    records each alert's arrival time, its labels and whether it was firing (no endsAt, or endsAt in
    the future).
Faults, each on an entity no earlier fault touched (so a re-sent alert of an older fault cannot be
mistaken for a detection):
  netdev_down     a veth goes down (ip link set dev X down), held until every enrolled system paged
                  (or --hold-timeout), then up again;
  netdev_flap300  a veth goes down for 300 ms only, then up; Prometheus at 1s may or may not see it;
  ib_port_down    ports/1/state of an InfiniBand HCA of the tree goes to "1: DOWN" (phys 3
                  Disabled), held like netdev_down, then back to "4: ACTIVE";
  ib_symbol_burst ports/1/counters/symbol_error of an HCA jumps by --burst.
The tree is written by ringside-agent-bench --tree (sim/sysfs_tree.h SysfsTreeWriter); faults
rewrite its files in place like SysfsTreeWriter::WriteFile (pwrite at 0, then ftruncate: the inode
stays, as on a real /sys; never by rename).

Delay = arrival at the receiver of the first firing alert of that system naming the faulted entity
(label device or netdev) - the time just before the fault was written (before `ip link` is
spawned, for netdevs: so ringside's netlink delay includes that process's start-up). Prometheus at
15s/15s is enrolled in the first --slow-faults faults of each held class only (it needs ~15-30 s
each). Every wait is bounded. Needs root (ip netns).

  bench/ttd_bench.py [--build=build] [--faults=6] [--flaps=4] [--slow-faults=2] [--no-prom15]
"""
import argparse
import datetime
import http.server
import json
import random
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
RS = ["rs-1s", "rs-100ms"]
PROM = ["prom-1s", "prom-15s"]
INTERVAL = {"rs-1s": "1s", "rs-100ms": "100ms", "prom-1s": "1s", "prom-15s": "15s"}


# ---------------------------------------------------------------- the receiver

class Receiver:
    def __init__(self):
        self.lock = threading.Lock()
        self.alerts = []  # (arrival, source, labels, firing)
        self.posts = 0
        recv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                now = time.time()
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                if self.path.rstrip("/") == "/api/v2/alerts":
                    try:
                        recv.add(now, json.loads(body))
                    except ValueError:
                        pass
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, now, alerts):
        with self.lock:
            self.posts += 1
            for a in alerts if isinstance(alerts, list) else []:
                labels = a.get("labels") or {}
                self.alerts.append((now, source_of(labels), labels, is_firing(a.get("endsAt"), now)))

    def first_firing(self, source, entity, since):
        with self.lock:
            for t, s, labels, firing in self.alerts:
                if (t >= since and s == source and firing
                        and entity in (labels.get("device"), labels.get("netdev"))):
                    return t
        return None

    def first_resolved(self, source, entity, since):
        """Whether the first alert about entity after since arrived resolved (a lost page)."""
        with self.lock:
            for t, s, labels, firing in self.alerts:
                if (t >= since and s == source
                        and entity in (labels.get("device"), labels.get("netdev"))):
                    return not firing
        return False

    def firing_before(self, source, entity, since):
        """A firing alert about entity that arrived before the fault: a false or stale alarm."""
        with self.lock:
            return any(t < since and s == source and f
                       and entity in (l.get("device"), l.get("netdev"))
                       for t, s, l, f in self.alerts)


def source_of(labels):
    if labels.get("ttd_source") in PROM:
        return labels["ttd_source"]
    if labels.get("node") in RS and labels.get("alertname", "").startswith("Ringside"):
        return labels["node"]
    return "other"


def is_firing(ends_at, now):
    if not ends_at or ends_at.startswith("0001-"):
        return True
    s = ends_at.replace("Z", "+00:00")
    # Trim fractional seconds to microseconds for fromisoformat.
    if "." in s:
        head, rest = s.split(".", 1)
        frac = "".join(c for c in rest if c.isdigit())
        tz = rest[len(frac):]
        s = head + "." + (frac + "000000")[:6] + tz
    try:
        return datetime.datetime.fromisoformat(s).timestamp() > now
    except ValueError:
        return True


# ---------------------------------------------------------------- processes

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(("GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path).encode())
                if s.recv(64).startswith(b"HTTP/1.") :
                    return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


class Procs:
    def __init__(self, work):
        self.work = work
        self.procs = []

    def start(self, name, argv):
        log = open(os.path.join(self.work, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append((name, p))
        return p

    def stop(self):
        for _, p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for _, p in reversed(self.procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def start_aggregator(procs, build, name, recv_port):
    log = os.path.join(procs.work, name + ".log")
    p = procs.start(name, [os.path.join(build, "daemon/ringside-aggregator"),
                           "--listen=127.0.0.1:0", "--http-listen=",
                           "--alertmanager-url=http://127.0.0.1:%d" % recv_port,
                           "--alert-min-firing=1s"])
    deadline = time.time() + 30
    while time.time() < deadline:
        with open(log) as f:
            for line in f:
                if "ingest (gRPC) listening on" in line and "(port " in line:
                    return line.split("(port ")[1].split(")")[0]
        if p.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("aggregator %s did not start; see %s" % (name, log))


def prom_config(work, name, interval, recv_port, targets, window):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    rules = os.path.join(d, "rules.yml")
    with open(rules, "w") as f:
        f.write("""groups:
- name: ttd
  rules:
  - alert: TtdNetdevDown
    expr: node_network_up{device=~"tv.*"} == 0
    for: 0s
  - alert: TtdIbPortDown
    expr: node_infiniband_state_id != 4
    for: 0s
  - alert: TtdIbSymbolErrors
    expr: increase(node_infiniband_symbol_error_total[%s]) > 0
    for: 0s
""" % window)
    cfg = os.path.join(d, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("""global:
  scrape_interval: %s
  evaluation_interval: %s
  external_labels:
    ttd_source: %s
rule_files: [%s]
alerting:
  alertmanagers:
  - api_version: v2
    static_configs:
    - targets: ['127.0.0.1:%d']
scrape_configs:
- job_name: node
  static_configs:
  - targets: [%s]
""" % (interval, interval, name, json.dumps(rules), recv_port,
       ", ".join("'127.0.0.1:%d'" % t for t in targets)))
    return d, cfg


# ---------------------------------------------------------------- faults

def write_in_place(path, content):
    """As SysfsTreeWriter::WriteFile: pwrite at 0, then truncate; the inode stays."""
    fd = os.open(path, os.O_WRONLY)
    try:
        data = content.encode()
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def ip(*args):
    subprocess.run(["ip"] + list(args), check=True)


def run_fault(recv, cls, entity, inject, restore, enrolled, hold_timeout, settle, jitter):
    # A random phase against every system's sampling and evaluation ticks.
    time.sleep(jitter.uniform(0.0, jitter.span))
    for s in enrolled:
        if recv.firing_before(s, entity, time.time()):
            print("  note: %s had a firing alert about %s before the fault" % (s, entity))
    t0 = time.time()
    inject()
    got = {}
    deadline = t0 + hold_timeout
    while time.time() < deadline and len(got) < len(enrolled):
        for s in enrolled:
            if s not in got:
                t = recv.first_firing(s, entity, t0)
                if t is not None:
                    got[s] = t - t0
        time.sleep(0.005)
    if restore:
        restore()
    # A page may still come after a short fault was restored (netdev_flap300).
    end = time.time() + settle
    while time.time() < end and len(got) < len(enrolled):
        for s in enrolled:
            if s not in got:
                t = recv.first_firing(s, entity, t0)
                if t is not None:
                    got[s] = t - t0
        time.sleep(0.01)
    row = {"class": cls, "entity": entity, "delays": {s: got.get(s) for s in enrolled},
           "resolved_first": [s for s in enrolled if recv.first_resolved(s, entity, t0)]}
    print("  %-15s %-8s %s" % (cls, entity, "  ".join(
        "%s=%s" % (s, "%.3fs" % got[s] if s in got else "MISSED") for s in enrolled)), flush=True)
    return row


# ---------------------------------------------------------------- main

def inside(a):
    build = os.path.abspath(a.build)
    work = tempfile.mkdtemp(prefix="ringside-ttd-bench-")
    procs = Procs(work)
    try:
        ip("link", "set", "lo", "up")
        n_veth = a.faults + a.flaps
        for i in range(n_veth):
            ip("link", "add", "tvA%d" % i, "type", "veth", "peer", "name", "tvB%d" % i)
            ip("link", "set", "tvA%d" % i, "up")
            ip("link", "set", "tvB%d" % i, "up")
        tree = os.path.join(work, "tree")
        subprocess.run(
            [os.path.join(build, "bench/ringside-agent-bench"), "--tree=" + tree, "--cycles=1",
             "--scrapes=1", "--duration=100ms", "--node-exporter=", "--nvlink-ethtool=false",
             "--rounds=1", "--lean-variant=false"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        recv = Receiver()

        # node_exporters: the namespace's /sys (ip netns exec remounted it) and the tree.
        ne_net, ne_ib = free_port(), free_port()
        procs.start("node-exporter-net", [NODE_EXPORTER, "--collector.disable-defaults",
                                          "--collector.netclass",
                                          "--web.listen-address=127.0.0.1:%d" % ne_net])
        procs.start("node-exporter-ib", [NODE_EXPORTER, "--collector.disable-defaults",
                                         "--collector.infiniband", "--path.sysfs=" + tree,
                                         "--web.listen-address=127.0.0.1:%d" % ne_ib])
        proms = ["prom-1s"] + ([] if a.no_prom15 else ["prom-15s"])
        for name in proms:
            iv = INTERVAL[name]
            window = "3s" if iv == "1s" else "45s"
            d, cfg = prom_config(work, name, iv, recv.port, [ne_net, ne_ib], window)
            port = free_port()
            procs.start(name, [PROMETHEUS, "--config.file=" + cfg,
                               "--storage.tsdb.path=" + os.path.join(d, "data"),
                               "--web.listen-address=127.0.0.1:%d" % port])
            if not wait_http(port, "/-/ready"):
                sys.exit("%s did not start; see %s/%s.log" % (name, work, name))
        for name in RS:
            agg = start_aggregator(procs, build, name + "-aggregator", recv.port)
            procs.start(name + "-agent", [
                os.path.join(build, "daemon/ringside-agent"), "--sysfs-root=" + tree,
                "--node-name=" + name, "--aggregator=127.0.0.1:" + agg,
                "--interval=" + INTERVAL[name], "--listen=", "--nvml-library=",
                "--ethtool-source=off", "--link-events=true", "--collectives-socket="])
        # Warm-up: two scrapes of each Prometheus before the first fault (rate windows need two
        # samples), the agents connected and past their first samples.
        warm = a.warmup if a.warmup is not None else (32 if "prom-15s" in proms else 5)
        print("work folder %s; receiver 127.0.0.1:%d; warming up %d s" % (work, recv.port, warm),
              flush=True)
        time.sleep(warm)
        for _, p in procs.procs:
            if p.poll() is not None:
                sys.exit("a child exited early; see the logs in %s" % work)

        fast = RS + ["prom-1s"]
        jitter = random.Random(a.seed)
        jitter.span = a.jitter
        rows = []
        ib = ["mlx5_%d" % i for i in range(8)]  # the tree's InfiniBand HCAs (mlx5_8/9 are RoCE)
        n_ib = min(a.faults, 4)
        for i in range(a.faults):
            dev = "tvA%d" % i
            enrolled = fast + (["prom-15s"] if "prom-15s" in proms and i < a.slow_faults else [])
            rows.append(run_fault(
                recv, "netdev_down", dev, lambda d=dev: ip("link", "set", "dev", d, "down"),
                lambda d=dev: ip("link", "set", "dev", d, "up"), enrolled,
                a.slow_hold if "prom-15s" in enrolled else a.hold, 0.0, jitter))
            time.sleep(a.gap)
        for i in range(a.flaps):
            dev = "tvA%d" % (a.faults + i)

            def flap(d=dev):
                ip("link", "set", "dev", d, "down")
                time.sleep(0.3)
                ip("link", "set", "dev", d, "up")
            rows.append(run_fault(recv, "netdev_flap300", dev, flap, None, fast, a.hold, 0.0, jitter))
            time.sleep(a.gap)
        for i in range(n_ib):
            dev = ib[i]
            port = os.path.join(tree, "class/infiniband", dev, "ports/1")
            enrolled = fast + (["prom-15s"] if "prom-15s" in proms and i < a.slow_faults else [])

            def down(p=port):
                write_in_place(os.path.join(p, "state"), "1: DOWN\n")
                write_in_place(os.path.join(p, "phys_state"), "3: Disabled\n")

            def up(p=port):
                write_in_place(os.path.join(p, "phys_state"), "5: LinkUp\n")
                write_in_place(os.path.join(p, "state"), "4: ACTIVE\n")
            rows.append(run_fault(recv, "ib_port_down", dev, down, up, enrolled,
                                  a.slow_hold if "prom-15s" in enrolled else a.hold, 0.0, jitter))
            time.sleep(a.gap)
        for i in range(n_ib):
            dev = ib[4 + i]
            f = os.path.join(tree, "class/infiniband", dev, "ports/1/counters/symbol_error")
            enrolled = fast + (["prom-15s"] if "prom-15s" in proms and i < a.slow_faults else [])

            def burst(f=f):
                with open(f) as fh:
                    v = int(fh.read().strip() or 0)
                write_in_place(f, "%d\n" % (v + a.burst))
            rows.append(run_fault(recv, "ib_symbol_burst", dev, burst, None, enrolled,
                                  a.slow_hold if "prom-15s" in enrolled else a.hold, 0.0, jitter))
            time.sleep(a.gap)
        report(rows, recv, proms)
    finally:
        procs.stop()
        if a.keep:
            print("kept %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)


def report(rows, recv, proms):
    systems = RS + proms
    classes = []
    for r in rows:
        if r["class"] not in classes:
            classes.append(r["class"])
    print("\nmedian fault -> first firing alert at the receiver (paged/faults)")
    print("%-16s" % "class" + "".join("%-18s" % s for s in systems)
          + "".join("%-18s" % ("%s/%s" % (p, r)) for p in proms for r in RS))
    for c in classes:
        cells, med = [], {}
        for s in systems:
            ds = [r["delays"][s] for r in rows if r["class"] == c and s in r["delays"]]
            got = [d for d in ds if d is not None]
            if not ds:
                cells.append("%-18s" % "-")
                continue
            med[s] = statistics.median(got) if got else None
            cells.append("%-18s" % ("%s (%d/%d)" % ("%.3fs" % med[s] if got else "none",
                                                     len(got), len(ds))))
        ratios = []
        for p in proms:
            for r in RS:
                if med.get(p) and med.get(r):
                    ratios.append("%-18s" % ("%.1fx" % (med[p] / med[r])))
                else:
                    ratios.append("%-18s" % "-")
        print("%-16s" % c + "".join(cells) + "".join(ratios))
    lost = {}
    for r in rows:
        for s in r["resolved_first"]:
            lost[s] = lost.get(s, 0) + 1
    print("first alert about the entity arrived resolved (a lost page): %s"
          % (", ".join("%s %d" % kv for kv in sorted(lost.items())) or "never"))
    print("receiver: %d POSTs, %d alerts" % (recv.posts, len(recv.alerts)))
    print("JSON " + json.dumps(rows))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--faults", type=int, default=6,
                    help="faults per held class (netdev_down; IB classes at most 4 each)")
    ap.add_argument("--flaps", type=int, default=4, help="300 ms netdev flaps")
    ap.add_argument("--slow-faults", type=int, default=2,
                    help="faults per held class in which Prometheus 15s/15s is enrolled")
    ap.add_argument("--no-prom15", action="store_true", help="skip Prometheus 15s/15s")
    ap.add_argument("--hold", type=float, default=6.0,
                    help="longest wait for the fast systems' pages (s)")
    ap.add_argument("--slow-hold", type=float, default=40.0,
                    help="longest wait when Prometheus 15s/15s is enrolled (s)")
    ap.add_argument("--gap", type=float, default=1.0, help="pause between faults (s)")
    ap.add_argument("--burst", type=int, default=1000, help="symbol errors per burst")
    ap.add_argument("--jitter", type=float, default=1.0,
                    help="random wait before each fault, 0..this (s): a random phase")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", type=float, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for b in (NODE_EXPORTER, PROMETHEUS):
        if not os.access(b, os.X_OK):
            sys.exit("%s is missing" % b)
    if a.inside:
        inside(a)
        return
    if os.geteuid() != 0:
        sys.exit("needs root (ip netns add)")
    ns = "ringside-ttd-%d" % os.getpid()
    ip("netns", "add", ns)
    try:
        argv = [a for a in sys.argv[1:]]
        # The build path is resolved here: ip netns exec keeps the working folder.
        rc = subprocess.call(["ip", "netns", "exec", ns, sys.executable,
                              os.path.abspath(__file__), "--inside"] + argv)
    finally:
        subprocess.call(["ip", "netns", "del", ns])
    sys.exit(rc)


if __name__ == "__main__":
    main()
