#!/usr/bin/env bash
# mmdebstrap extract hook of deploy/image/build.sh (runs on the host, as root):
#   customize-rootfs.sh ROOT UID GID CA_BUNDLE INCLUDE RINGSIDE_DEB...
# (CA_BUNDLE: the PEM file to install as /etc/ssl/certs/ca-certificates.crt; INCLUDE: the
# comma-separated --include list mmdebstrap was given.)
# Unpacks the ringside packages into ROOT; removes the packages only maintainer scripts need
# (prune-rootfs.py: adduser, passwd with its setuid programs, debconf, mawk, and what only they
# depend on) and lists the rest in /var/lib/dpkg/status; writes the accounts (root, ringside
# UID:GID, nobody), the name service and dynamic linker configuration, the state directories, the
# CA bundle; drops documentation other than copyright files.
set -euo pipefail
root="$1"; uid="$2"; gid="$3"; ca_bundle="$4"; include="$5"; shift 5

for deb in "$@"; do
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$root" --keep-directory-symlink
done

# Drop what only maintainer scripts need; write /var/lib/dpkg/status for what stays. What stays:
# the ringside packages, coreutils (the init containers' install, cp, mv), base-files
# (/etc/os-release), the RDMA providers libibverbs loads, and their dependencies.
keep=(base-files coreutils ibverbs-providers)
for deb in "$@"; do keep+=("$(dpkg-deb -f "$deb" Package)"); done
"$(dirname "$0")/prune-rootfs.py" "$root" "$root/var/cache/apt/archives" \
  --include "$include" --keep "${keep[@]}" --deb "$@"

cat > "$root/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/usr/sbin/nologin
ringside:x:$uid:$gid:ringside:/var/lib/ringside:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
PASSWD
cat > "$root/etc/group" <<GROUP
root:x:0:
ringside:x:$gid:
nogroup:x:65534:
GROUP
chmod 0644 "$root/etc/passwd" "$root/etc/group"
cat > "$root/etc/nsswitch.conf" <<'NSS'
passwd: files
group: files
hosts: files dns
NSS
echo 'include /etc/ld.so.conf.d/*.conf' > "$root/etc/ld.so.conf"
ldconfig -r "$root"

install -d -m 0750 -o "$uid" -g "$gid" "$root/var/lib/ringside"
install -d -m 0700 -o "$uid" -g "$gid" "$root/var/lib/ringside-aggregator"
install -d -m 1777 "$root/tmp"
install -d -m 0755 "$root/run" "$root/root"

# The system CA store libcurl reads (alert delivery over https without --alert-ca): the build
# machine's bundle, not the ca-certificates package, whose maintainer scripts need debconf and
# perl. It is as fresh as the build machine's ca-certificates: rebuild the image to refresh it.
install -D -m 0644 -o 0 -g 0 "$ca_bundle" "$root/etc/ssl/certs/ca-certificates.crt"

find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null || true
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/locale" \
  "$root/usr/share/lintian" "$root/usr/share/bug"
