# Sourced by the deploy tests that build a Debian root and chroot into it (package_install_test.sh,
# image_rootfs_test.sh): root or skip, mmdebstrap present, a mount namespace of their own with the
# root on a tmpfs (quick to write, and gone with every mount under it when the test exits:
# deleting its ~10,000 files took up to 30 s here), and the bad/step helpers.
#
#   tmpfs_root_enter WHY DIR "$@"   (WHY: what root is needed for; DIR: the root to make; "$@": the
#                                    script's own arguments, for the re-exec in the namespace)
# Sets `root`, `fail` and `start`; defines bad() and step().

fail=0
start=$SECONDS
bad() { echo "FAIL: $*"; fail=1; }
step() { echo "--- $* ($((SECONDS - start)) s)"; }

tmpfs_root_enter() {
  local why="$1" dir="$2"
  shift 2
  if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: needs root: $why"
    exit 77
  fi
  command -v mmdebstrap >/dev/null ||
    { echo "FAIL: mmdebstrap is not installed (scripts/install-deps.sh installs it)"; exit 1; }
  if [ -z "${RINGSIDE_DEPLOY_TEST_UNSHARED:-}" ]; then
    exec env RINGSIDE_DEPLOY_TEST_UNSHARED=1 unshare --mount --propagation private -- bash "$0" "$@"
  fi
  root="$dir"
  mkdir -p "$(dirname "$root")"
  # Never delete through a mount (the namespace starts with a copy of the machine's mounts).
  if findmnt -rno TARGET | grep -q "^$root"; then echo "FAIL: something is mounted under $root"; exit 1; fi
  rm -rf "$root"   # an older run's, from before the tmpfs
  mkdir -p "$root"
  mount -t tmpfs -o mode=0755,size=4g ringside-deploy-test "$root"
}
