#!/usr/bin/env python3
"""Checks that the fuzz build still compiles with Debian 12's clang (14), from the gcc build.

The libFuzzer targets (tests/fuzz, docs/reliability.md) are built with clang, but CI builds with
gcc, which accepts C++20 that clang 14 refuses (a lambda capturing a structured binding broke the
fuzz build twice). This runs `clang++-14 -fsyntax-only` on every translation unit the fuzz build
compiles (the list CMake wrote: the sources of every library the fuzz targets link, the entries
and fuzzer_main.cc), each with its own include directories and definitions from the gcc build's
compile_commands.json and the fuzz build's sanitizer flags, and fails with clang's errors if one
does not compile. Syntax-only: it parses and instantiates like the real compile but generates no
code, so it costs a fraction of the clang build.

usage: clang14_check.py --compile-commands FILE --sources FILE [--clang PATH] [--jobs N]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile-commands", required=True)
    ap.add_argument("--sources", required=True)
    ap.add_argument("--clang", default="")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    opts = ap.parse_args()

    clang = find_clang(opts.clang)
    with open(opts.compile_commands) as f:
        db = {os.path.realpath(os.path.join(e["directory"], e["file"])): e for e in json.load(f)}
    # Lines: "<source>" or "<source>\t<source whose flags to use>\t<extra flags>" (for a file the
    # gcc build does not compile, like fuzzer_main.cc).
    jobs = []
    missing = []
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
            jobs.append((src, clang_args(entry, clang) + extra + [src], entry["directory"]))
    if missing:
        print("clang14_check: not in compile_commands.json (build the project first):\n  " +
              "\n  ".join(missing), file=sys.stderr)
        return 1

    def run(job):
        src, args, cwd = job
        p = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
        return src, p.returncode, p.stderr, args

    start = time.monotonic()
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        for src, rc, err, args in pool.map(run, jobs):
            if rc != 0:
                failed += 1
                print(f"FAILED with {os.path.basename(clang)}: {src}\n{err}", file=sys.stderr)
                print("command: " + " ".join(shlex.quote(a) for a in args), file=sys.stderr)
    print(f"clang14_check: {len(jobs)} files with {clang}, {failed} failed, "
          f"{time.monotonic() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
