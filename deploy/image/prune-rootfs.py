#!/usr/bin/env python3
"""Records the packages of an extracted root filesystem and removes those nothing needs at run time.

    prune-rootfs.py ROOT ARCHIVES_DIR --include PKG,... --keep PKG... --deb FILE...

ARCHIVES_DIR holds the .deb files mmdebstrap downloaded (and, with a cache, possibly others);
--deb names extra .deb files already unpacked into ROOT (the ringside packages). The packages in
ROOT are those of the dependency closure of --include whose files are all there (what apt
unpacked). A package stays if it is one of
--keep or a dependency (Depends, Pre-Depends; the first available alternative, virtual names
through Provides) of one that stays. Edges into packages only maintainer scripts use are not
followed (adduser, passwd, debconf: libibverbs1's postinst adds a group; awk: base-files'
postinst; systemd-sysusers: ringside-agent's postinst), because nothing here runs maintainer
scripts. The files of every other package in ROOT
are deleted. ROOT/var/lib/dpkg/status then lists the packages that stay, as dpkg would (image
scanners read it). Prints what it removed.
"""
import argparse
import os
import re
import subprocess

SCRIPT_ONLY = {"adduser", "passwd", "debconf", "debconf-2.0", "awk", "mawk",
               # ringside-agent's postinst (systemd-sysusers); build.sh leaves them out
               "systemd", "systemd-standalone-sysusers", "systemd-sysusers"}


def control(deb):
    text = subprocess.run(["dpkg-deb", "-f", deb], check=True, capture_output=True,
                          text=True).stdout
    fields, key = {}, None
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line
        elif ":" in line:
            key, value = line.split(":", 1)
            fields[key] = value.strip()
    return fields, text.rstrip("\n")


def names(field):
    """'a (>= 1) | b, c' -> [['a', 'b'], ['c']]"""
    return [[re.sub(r"[\s(:].*", "", alt.strip()) for alt in group.split("|")]
            for group in filter(None, (g.strip() for g in field.split(",")))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("archives")
    ap.add_argument("--include", required=True)
    ap.add_argument("--keep", nargs="+", required=True)
    ap.add_argument("--deb", nargs="*", default=[])
    a = ap.parse_args()

    debs = {}  # package -> (path, fields, text)
    paths = [os.path.join(a.archives, f) for f in sorted(os.listdir(a.archives))
             if f.endswith(".deb")] + a.deb
    for path in paths:
        fields, text = control(path)
        debs[fields["Package"]] = (path, fields, text)
    provides = {}
    for name, (_, f, _) in debs.items():
        for group in names(f.get("Provides", "")):
            provides.setdefault(group[0], []).append(name)

    def closure(roots, skip):
        seen, todo = set(), list(roots)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            if name not in debs:
                raise SystemExit(f"prune-rootfs: {name} is not among the downloaded packages")
            seen.add(name)
            f = debs[name][1]
            for group in names(f.get("Pre-Depends", "")) + names(f.get("Depends", "")):
                for alt in group:
                    if alt in skip:
                        break
                    dep = alt if alt in debs else (provides.get(alt) or [None])[0]
                    if dep:
                        todo.append(dep)
                        break
        return seen

    def files_of(name):
        tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", debs[name][0]], check=True,
                             capture_output=True).stdout
        return subprocess.run(["tar", "-t"], input=tar, check=True,
                              capture_output=True).stdout.decode().splitlines()

    def in_root(path):
        return os.path.lexists(os.path.join(a.root, path.lstrip("./")))

    # What apt unpacked: the closure of --include (as apt resolved it, with a cache ARCHIVES_DIR
    # may offer more packages than apt chose, so a candidate counts only if its files are all in
    # ROOT), and the ringside packages.
    include = [p for p in a.include.split(",") if p]
    ringside = {name for name, v in debs.items() if v[0] in a.deb}
    unpacked = set(ringside)
    for name in closure(include, set()) - ringside:
        if all(in_root(f) for f in files_of(name) if not f.endswith("/")):
            unpacked.add(name)
    live = closure(a.keep, SCRIPT_ONLY)
    if live - unpacked:
        raise SystemExit("prune-rootfs: needed but not unpacked: " + " ".join(sorted(live - unpacked)))
    dead = sorted(unpacked - live)
    for name in dead:
        dirs = []
        for path in files_of(name):
            full = os.path.join(a.root, path.lstrip("./"))
            if path.endswith("/"):
                dirs.append(full)
            elif os.path.lexists(full) and not os.path.isdir(full):
                os.remove(full)
        for d in sorted(dirs, key=len, reverse=True):  # folders left empty only
            try:
                os.rmdir(d)
            except OSError:
                pass
    with open(os.path.join(a.root, "var/lib/dpkg/status"), "w") as out:
        for name in sorted(live):
            text = debs[name][2]
            out.write(re.sub(r"^(Package: .*)$", r"\1\nStatus: install ok installed", text,
                             count=1, flags=re.M) + "\n\n")
    print("prune-rootfs: removed " + " ".join(dead))


if __name__ == "__main__":
    main()
