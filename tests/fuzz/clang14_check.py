#!/usr/bin/env python3
"""Checks that the fuzz build still compiles with Debian 12's clang (14), from the gcc build.

The libFuzzer targets (tests/fuzz, docs/reliability.md) are built with clang, but CI builds with
gcc, which accepts C++20 that clang 14 refuses (a lambda capturing a structured binding broke the
fuzz build twice). This runs `clang++-14 -fsyntax-only` on every translation unit the fuzz build
compiles (the list CMake wrote: the sources of every library the fuzz targets link, the entries
and fuzzer_main.cc), each with its own include directories and definitions from the gcc build's
compile_commands.json and the fuzz build's sanitizer flags, and fails with clang's errors if one
does not compile. Syntax-only: it parses and instantiates like the real compile but generates no
code; and the files of one library are checked as one translation unit (their common headers
parsed once; a unit that fails is split until each failure is one file's own), so the whole check
costs a fraction of the clang build (docs/reliability.md has its time).

usage: clang14_check.py --compile-commands FILE --sources FILE [--clang PATH] [--jobs N] [--batch N]
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# The fuzz build's flags (tests/fuzz/CMakeLists.txt RINGSIDE_FUZZ_FLAGS): they define macros
# (__has_feature(address_sanitizer), ...) code may test.
FUZZ_FLAGS = ["-fsanitize=fuzzer-no-link,address,undefined", "-fno-omit-frame-pointer"]
# Flags of the gcc command kept for clang: what changes how the source reads.
KEEP_WITH_ARG = {"-I", "-isystem", "-iquote", "-D", "-U", "-include"}
KEEP_PREFIX = ("-I", "-isystem", "-iquote", "-D", "-U", "-std=", "-O", "-pthread")


def find_clang(wanted):
    """The clang++ of major version 14 to use: `wanted`, clang++-14 or clang++."""
    candidates = [wanted] if wanted else ["clang++-14", "clang++"]
    for c in candidates:
        path = shutil.which(c)
        if not path:
            continue
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"clang version (\d+)", out)
        if m and m.group(1) == "14":
            return path
        if wanted:
            sys.exit(f"clang14_check: {c} is not clang 14: {out.splitlines()[0] if out else '?'}")
    sys.exit("clang14_check: no clang++ 14 found (Debian 12: apt-get install clang-14; "
             "scripts/install-deps.sh installs it)")


def clang_args(entry, clang):
    cmd = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [clang]
    i = 1
    while i < len(cmd):
        a = cmd[i]
        if a in KEEP_WITH_ARG and i + 1 < len(cmd):
            out += [a, cmd[i + 1]]
            i += 2
            continue
        if a.startswith(KEEP_PREFIX) and a not in KEEP_WITH_ARG:
            out.append(a)
        i += 1
    return out + FUZZ_FLAGS + ["-fsyntax-only", "-w"]


def unity_source(files):
    return "".join(f'#include "{f}"\n' for f in files)


ERROR_AT = re.compile(r"^(.+?):\d+:\d+: (fatal )?error:")
INCLUDED_FROM = re.compile(r"^(?:In file included from|\s+from) (.+?):\d+[:,]")


def failing_files(stderr, files, cwd):
    """The files of a unit its errors are in (an error in a header counts for the file of the
    unit that included it), and whether one was fatal (clang stopped there)."""
    batch = set(files)
    named, fatal, stack = set(), False, []
    for line in stderr.splitlines():
        m = INCLUDED_FROM.match(line)
        if m:
            if line.startswith("In file"):
                stack = []
            stack.append(os.path.realpath(os.path.join(cwd, m.group(1))))
            continue
        m = ERROR_AT.match(line)
        if m:
            fatal = fatal or bool(m.group(2))
            where = os.path.realpath(os.path.join(cwd, m.group(1)))
            owner = where if where in batch else next((f for f in reversed(stack) if f in batch), None)
            named.add(owner)  # None: not told (the unit is split in halves)
        stack = [] if not line.startswith(" ") else stack
    return named, fatal


def check(files, args, cwd, tmpdir, counter):
    """clang on `files` as one translation unit (each file #included in turn), so the common
    headers are parsed once. Files of one unit can clash (two helpers of one name in their
    anonymous namespaces, two system headers that do not go together): when the unit fails, the
    files its errors are in are checked alone (clang goes on past an error: the other files were
    checked; after a fatal one, they are checked again as one unit), so only a file that fails on
    its own counts. Returns [(file, stderr)] of the files that fail."""
    if len(files) == 1:
        cmd = args + [files[0]]
    else:
        counter[0] += 1
        unity = os.path.join(tmpdir, f"unity_{counter[0]}.cc")
        with open(unity, "w") as f:
            f.write(unity_source(files))
        cmd = args + ["-ferror-limit=0", unity]
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if os.environ.get("CLANG14_CHECK_VERBOSE"):
        print(f"  {len(files):3d} files {time.monotonic() - t0:6.1f} s rc={p.returncode} "
              f"{os.path.relpath(files[0])}", file=sys.stderr)
    if p.returncode == 0:
        return []
    if len(files) == 1:
        return [(files[0], p.stderr + "command: " + " ".join(shlex.quote(a) for a in cmd))]
    named, fatal = failing_files(p.stderr, files, cwd)
    if None in named or not named:
        half = len(files) // 2
        return (check(files[:half], args, cwd, tmpdir, counter) +
                check(files[half:], args, cwd, tmpdir, counter))
    out = []
    for f in files:
        if f in named:
            out += check([f], args, cwd, tmpdir, counter)
    if fatal:
        rest = [f for f in files if f not in named]
        if rest:
            out += check(rest, args, cwd, tmpdir, counter)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile-commands", required=True)
    ap.add_argument("--sources", required=True)
    ap.add_argument("--clang", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch", type=int, default=24,
                    help="files per translation unit (1: each file alone, as the real build)")
    opts = ap.parse_args()

    clang = find_clang(opts.clang)
    with open(opts.compile_commands) as f:
        db = {os.path.realpath(os.path.join(e["directory"], e["file"])): e for e in json.load(f)}
    # Lines: "<source>" or "<source>\t<source whose flags to use>\t<extra flags>" (for a file the
    # gcc build does not compile, like fuzzer_main.cc). Files with the same flags (one library's)
    # are checked together.
    groups = {}
    missing = []
    count = 0
    with open(opts.sources) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            src = os.path.realpath(parts[0])
            like = os.path.realpath(parts[1]) if len(parts) > 1 and parts[1] else src
            extra = shlex.split(parts[2]) if len(parts) > 2 else []
            entry = db.get(like)
            if entry is None:
                missing.append(like)
                continue
            key = (tuple(clang_args(entry, clang) + extra), entry["directory"])
            groups.setdefault(key, []).append(src)
            count += 1
    if missing:
        print("clang14_check: not in compile_commands.json (build the project first):\n  " +
              "\n  ".join(missing), file=sys.stderr)
        return 1
    jobs = []
    for (args, cwd), files in groups.items():
        # A file that defines the fuzzer's entry point once per entry name goes alone.
        n = 1 if any("-DRINGSIDE_FUZZ_ENTRY=" in a for a in args) else max(1, opts.batch)
        for i in range(0, len(files), n):
            jobs.append((files[i:i + n], list(args), cwd))
    jobs.sort(key=lambda j: -len(j[0]))  # the big units first

    start = time.monotonic()
    failures = []
    with tempfile.TemporaryDirectory(prefix="clang14_check.") as tmpdir:
        def run(job):
            files, args, cwd = job
            sub = tempfile.mkdtemp(dir=tmpdir)
            return check(files, args, cwd, sub, [0])
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            for failed in pool.map(run, jobs):
                failures += failed
    for src, err in failures:
        print(f"FAILED with {os.path.basename(clang)}: {src}\n{err}", file=sys.stderr)
    print(f"clang14_check: {count} files in {len(jobs)} units with {clang}, {len(failures)} "
          f"failed, {time.monotonic() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
