#!/usr/bin/env python3
"""Removes from an extracted root filesystem the packages nothing needs at run time.

    prune-rootfs.py ROOT ARCHIVES_DIR KEEP_PACKAGE...

Mark and sweep over ROOT/var/lib/dpkg/status (written by customize-rootfs.sh): a package stays if
it is one of KEEP_PACKAGE or a dependency (Depends, Pre-Depends; the first satisfiable alternative,
virtual names through Provides) of one that stays. Edges into packages that only maintainer scripts
use are not followed (adduser, passwd, debconf: libibverbs1's postinst adds a group; awk:
base-files' postinst), because nothing here runs maintainer scripts. Every other package's files (listed by its .deb in
ARCHIVES_DIR) are deleted, and its status entry with them. Prints what it removed.
"""
import os
import re
import subprocess
import sys

SCRIPT_ONLY = {"adduser", "passwd", "debconf", "debconf-2.0", "awk", "mawk"}


def stanzas(text):
    for block in text.strip().split("\n\n"):
        fields, key = {}, None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields:
            yield fields, block


def names(field):
    """'a (>= 1) | b, c' -> [['a', 'b'], ['c']]"""
    out = []
    for group in filter(None, (g.strip() for g in field.split(","))):
        out.append([re.sub(r"[\s(:].*", "", alt.strip()) for alt in group.split("|")])
    return out


def main():
    root, archives, keep = sys.argv[1], sys.argv[2], sys.argv[3:]
    status_path = os.path.join(root, "var/lib/dpkg/status")
    entries = {f["Package"]: (f, block) for f, block in stanzas(open(status_path).read())}
    provides = {}
    for name, (f, _) in entries.items():
        for group in names(f.get("Provides", "")):
            provides.setdefault(group[0], []).append(name)

    def resolve(alternatives):
        for alt in alternatives:
            if alt in SCRIPT_ONLY:
                return None
            if alt in entries:
                return alt
            if alt in provides:
                return provides[alt][0]
        return None

    live, todo = set(), [k for k in keep if k in entries]
    missing = [k for k in keep if k not in entries]
    if missing:
        sys.exit(f"prune-rootfs: not in the image: {' '.join(missing)}")
    while todo:
        name = todo.pop()
        if name in live:
            continue
        live.add(name)
        f = entries[name][0]
        for group in names(f.get("Pre-Depends", "")) + names(f.get("Depends", "")):
            dep = resolve(group)
            if dep and dep not in live:
                todo.append(dep)

    dead = sorted(set(entries) - live)
    debs = {}
    for deb in os.listdir(archives):
        if deb.endswith(".deb"):
            debs[deb.split("_", 1)[0]] = os.path.join(archives, deb)
    for name in dead:
        listing = subprocess.run(["dpkg-deb", "--fsys-tarfile", debs[name]], check=True,
                                 capture_output=True).stdout
        files = subprocess.run(["tar", "-t"], input=listing, check=True,
                               capture_output=True).stdout.decode().splitlines()
        dirs = []
        for path in files:
            full = os.path.join(root, path.lstrip("./"))
            if path.endswith("/"):
                dirs.append(full)
            elif os.path.lexists(full) and not os.path.isdir(full):
                os.remove(full)
        for d in sorted(dirs, key=len, reverse=True):  # empty folders only
            try:
                os.rmdir(d)
            except OSError:
                pass
    with open(status_path, "w") as out:
        out.write("\n\n".join(entries[n][1] for n in sorted(live)) + "\n")
    print("prune-rootfs: removed " + " ".join(dead))


if __name__ == "__main__":
    main()
