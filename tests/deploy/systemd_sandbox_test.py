#!/usr/bin/env python3
"""The built ringside-aggregator and ringside-agent run under their units' seccomp settings.

systemd-analyze checks the units' syntax and scores them, but cannot say whether the programs
still work under them, and the build machine has no systemd as PID 1. This test rebuilds the
units' seccomp part with libseccomp (through ctypes), from the unit files as shipped:
SystemCallFilter= (groups expanded by `systemd-analyze syscall-filter`, '~' lines subtracted),
SystemCallErrorNumber=, RestrictAddressFamilies= and MemoryDenyWriteExecute=; as root it also
makes a mount namespace with / read-only but the state and temporary folders
(ProtectSystem=strict) and /proc mounted with ProtectProc=/ProcSubset='s options, then drops to
user nobody. It runs, on 127.0.0.1, an aggregator and an agent that uploads to
it, then checks both serve /metrics, the aggregator saw the agent's samples, both exit 0 on
SIGTERM / --duration, and neither logged a failed system call.

Not covered: the other namespaces and mounts, device cgroups, capabilities (systemd's own job);
NVML and RDMA devices (none here).

Usage: systemd_sandbox_test.py SRC AGENT_BIN AGGREGATOR_BIN    (exit 77: skipped)
"""
import ctypes
import ctypes.util
import errno
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

SKIP = 77
FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17}


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def fail(why):
    print(f"FAIL: {why}", file=sys.stderr)
    sys.exit(1)


def directives(unit_path, name):
    """Every value of NAME= in [Service], in order."""
    out = []
    with open(unit_path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(name + "="):
                out.append(line[len(name) + 1:])
    return out


def expand(item, seen):
    if not item.startswith("@"):
        return {item}
    if item in seen:
        return set()
    seen.add(item)
    txt = subprocess.run(["systemd-analyze", "syscall-filter", item], capture_output=True,
                         text=True, check=True).stdout
    names = set()
    for line in txt.splitlines()[1:]:
        t = line.strip()
        if t and not t.startswith("#"):
            names |= expand(t, seen)
    return names


def seccomp_settings(unit_path):
    allow = None
    for value in directives(unit_path, "SystemCallFilter"):
        deny = value.startswith("~")
        items = set()
        for item in value.lstrip("~").split():
            items |= expand(item, set())
        if deny:
            if allow is None:
                fail(f"{unit_path}: a deny list without an allow list is not emulated")
            allow -= items
        else:
            allow = items if allow is None else allow | items
    if allow is None:
        fail(f"{unit_path}: no SystemCallFilter=")
    err = directives(unit_path, "SystemCallErrorNumber")
    err_no = getattr(errno, err[-1]) if err else None
    fams = None
    for value in directives(unit_path, "RestrictAddressFamilies"):
        fams = [FAMILIES[f] for f in value.split()]
    mdwe = "yes" in directives(unit_path, "MemoryDenyWriteExecute")
    return allow, err_no, fams, mdwe


class Cmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_CMP_EQ, SCMP_CMP_GT, SCMP_CMP_MASKED_EQ = 4, 6, 7


def act_errno(e):
    return 0x00050000 | e


def load_filters(allow, err_no, fams, mdwe):
    """In the child, before exec: the unit's filters (systemd also loads several)."""
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.c_void_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]

    def rule(ctx, action, name, *cmps):
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return
        arr = (Cmp * len(cmps))(*cmps) if cmps else None
        r = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if r != 0:
            raise OSError(-r, f"seccomp_rule_add {name}")

    # Second filter first: the allow list below blocks seccomp() itself.
    extra = lib.seccomp_init(SCMP_ACT_ALLOW)
    if mdwe:
        w, x = 0x2, 0x4  # PROT_WRITE, PROT_EXEC
        rule(extra, act_errno(errno.EPERM), "mmap", Cmp(2, SCMP_CMP_MASKED_EQ, w | x, w | x))
        rule(extra, act_errno(errno.EPERM), "mprotect", Cmp(2, SCMP_CMP_MASKED_EQ, x, x))
        rule(extra, act_errno(errno.EPERM), "pkey_mprotect", Cmp(2, SCMP_CMP_MASKED_EQ, x, x))
    if fams is not None:
        for d in range(0, max(fams)):
            if d not in fams:
                rule(extra, act_errno(errno.EAFNOSUPPORT), "socket", Cmp(0, SCMP_CMP_EQ, d, 0))
        rule(extra, act_errno(errno.EAFNOSUPPORT), "socket", Cmp(0, SCMP_CMP_GT, max(fams), 0))
    if lib.seccomp_load(extra) != 0:
        raise OSError(ctypes.get_errno(), "seccomp_load")
    base = lib.seccomp_init(act_errno(err_no) if err_no else SCMP_ACT_KILL_PROCESS)
    for name in sorted(allow | {"execve", "exit", "exit_group", "rt_sigreturn"}):
        rule(base, SCMP_ACT_ALLOW, name)
    if lib.seccomp_load(base) != 0:
        raise OSError(ctypes.get_errno(), "seccomp_load")


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def mount_settings(unit_path):
    """ProtectProc=/ProcSubset= as procfs options, and whether ProtectSystem=strict."""
    opts = []
    if "invisible" in directives(unit_path, "ProtectProc"):
        opts.append("hidepid=invisible")
    if "pid" in directives(unit_path, "ProcSubset"):
        opts.append("subset=pid")
    return ",".join(opts), "strict" in directives(unit_path, "ProtectSystem")


def can_mount():
    """Root, and the kernel lets this process make a mount namespace with procfs subset=pid."""
    if os.getuid() != 0:
        return False
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        "mount -t proc -o hidepid=invisible,subset=pid proc /proc && "
                        "test ! -e /proc/cpuinfo"], capture_output=True)
    return r.returncode == 0


def apply_mounts(proc_opts, strict, writable):
    """In the child: a private mount namespace with / read-only (ProtectSystem=strict, all but the
    state and temporary folders) and a fresh /proc with the unit's options."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    libc.syscall.restype = ctypes.c_long

    def check(r, what):
        if r != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what}: {os.strerror(e)}")

    MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x1, 0x20, 0x1000, 0x4000, 0x40000
    check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    if strict:
        attr = MountAttr(MS_RDONLY, 0, 0, 0)  # MOUNT_ATTR_RDONLY == 1
        AT_FDCWD, AT_RECURSIVE, SYS_mount_setattr = -100, 0x8000, 442
        check(libc.syscall(SYS_mount_setattr, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr),
                           ctypes.sizeof(attr)), "mount_setattr(/, RDONLY, recursive)")
        for path in writable:  # a bind mount copies the read-only flag; remount it writable
            check(libc.mount(path.encode(), path.encode(), None, MS_BIND, None), f"bind {path}")
            check(libc.mount(None, path.encode(), None, MS_REMOUNT | MS_BIND, None), f"rw {path}")
    check(libc.mount(b"proc", b"/proc", b"proc", 0, proc_opts.encode() or None), "mount /proc")


def start(unit_path, argv, log_path, writable, mounts):
    settings = seccomp_settings(unit_path)
    proc_opts, strict = mount_settings(unit_path)
    log = open(log_path, "w")

    def child():
        if mounts:
            apply_mounts(proc_opts, strict, writable)
        if os.getuid() == 0:  # as the service would: not root
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        load_filters(*settings)

    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=child)


def wait_for(path, pattern, proc, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with open(path) as f:
            m = re.search(pattern, f.read())
        if m:
            return m
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    with open(path) as f:
        fail(f"no /{pattern}/ in {os.path.basename(path)} (exit {proc.poll()}):\n{f.read()}")


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def main():
    if len(sys.argv) != 4:
        fail(__doc__)
    src, agent_bin, aggregator_bin = sys.argv[1:]
    if shutil.which("systemd-analyze") is None:
        skip("systemd-analyze is not installed (Debian package systemd)")
    if ctypes.util.find_library("seccomp") is None:
        skip("libseccomp.so.2 is not installed (Debian package libseccomp2)")
    units = os.path.join(src, "deploy", "systemd")
    tmp = tempfile.mkdtemp(prefix="ringside-sandbox-")
    os.chmod(tmp, 0o777)  # the services run as nobody
    procs = []
    cleanup = [tmp]
    try:
        if os.getuid() == 0:  # nobody may not reach the build tree (e.g. under /root): copy them
            bindir = os.path.join(tmp, "bin")
            os.mkdir(bindir)
            agent_bin = shutil.copy2(agent_bin, bindir)
            aggregator_bin = shutil.copy2(aggregator_bin, bindir)
        state = os.path.join(tmp, "state")
        os.mkdir(state)
        os.chmod(state, 0o777)
        agg_log, agent_log = os.path.join(tmp, "aggregator.log"), os.path.join(tmp, "agent.log")
        mounts = can_mount()
        if mounts:  # the emulation is in force: a folder nobody could write is read-only, /proc is
            # as the unit says, the state folder writable
            outside = os.path.join(os.path.dirname(tmp), os.path.basename(tmp) + "-ro")
            os.mkdir(outside)
            os.chmod(outside, 0o777)
            cleanup.append(outside)
            for unit, probe in (
                ("ringside-aggregator.service",
                 f"! touch {outside}/p 2>/dev/null && test ! -e /proc/cpuinfo && touch {state}/p"),
                ("ringside-agent.service",
                 f"! touch {outside}/p 2>/dev/null && test -e /proc/cpuinfo && touch {tmp}/p")):
                probe_log = os.path.join(tmp, "probe.log")
                p = start(os.path.join(units, unit), ["/bin/sh", "-c", probe], probe_log,
                          [state] if unit.startswith("ringside-aggregator") else [tmp], True)
                if p.wait(timeout=20) != 0:
                    fail(f"{unit}: the mount emulation is not in force ({probe}):\n"
                         f"{open(probe_log).read()}")
        agg = start(os.path.join(units, "ringside-aggregator.service"),
                    [aggregator_bin, "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
                     f"--state-dir={state}"], agg_log, [state], mounts)
        procs.append(agg)
        grpc_port = wait_for(agg_log, r"ingest \(gRPC\) listening on \S+ \(port (\d+)\)", agg).group(1)
        http_port = wait_for(agg_log, r"HTTP \(/metrics[^)]*\) listening on \S+ \(port (\d+)\)", agg).group(1)
        agent = start(os.path.join(units, "ringside-agent.service"),
                      [agent_bin, "--listen=127.0.0.1:0", f"--aggregator=127.0.0.1:{grpc_port}",
                       f"--collectives-socket={tmp}/collectives.sock", "--duration=4s",
                       "--nvml-library=", "--interval=200ms"], agent_log, [tmp], mounts)
        procs.append(agent)
        agent_port = wait_for(agent_log, r"serving /metrics on \S+ \(port (\d+)\)", agent).group(1)
        wait_for(agent_log, r"connected to 127\.0\.0\.1", agent)
        metrics = get(f"http://127.0.0.1:{agent_port}/metrics")
        if "ringside_agent_collector_up" not in metrics:
            fail(f"agent /metrics has no ringside_agent_collector_up:\n{metrics[:2000]}")
        time.sleep(1.0)
        agg_metrics = get(f"http://127.0.0.1:{http_port}/metrics")
        m = re.search(r"^ringside_aggregator_samples_received_total (\d+)", agg_metrics, re.M)
        if not m or int(m.group(1)) == 0:
            fail("the aggregator received no samples from the sandboxed agent")
        if agent.wait(timeout=20) != 0:
            fail(f"agent exited {agent.returncode}:\n{open(agent_log).read()}")
        agg.send_signal(signal.SIGTERM)
        if agg.wait(timeout=20) != 0:
            fail(f"aggregator exited {agg.returncode}:\n{open(agg_log).read()}")
        for path in (agg_log, agent_log):
            text = open(path).read()
            bad = [l for l in text.splitlines()
                   if re.search(r"Operation not permitted|Address family not supported|Bad system call",
                                l)]
            if bad:
                fail(f"{os.path.basename(path)}: a call the unit's filter refused:\n" + "\n".join(bad))
        what = "SystemCallFilter/SystemCallErrorNumber/RestrictAddressFamilies/MemoryDenyWriteExecute"
        if mounts:
            what += "/ProtectSystem=strict/ProtectProc/ProcSubset"
        else:
            print("note: not root or no procfs subset=pid here: mounts not emulated")
        print(f"ok: under the units' {what} as uid {65534 if os.getuid() == 0 else os.getuid()}: "
              f"the agent uploaded {m.group(1)} samples to the aggregator, both served /metrics and "
              f"exited 0")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for path in cleanup:
            shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
