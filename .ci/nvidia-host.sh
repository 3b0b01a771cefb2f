#!/usr/bin/env bash
# The tests that depend on the host's NVIDIA state, run on a host as a GPU
# developer has it, without changing this machine. In a private mount and
# PID namespace:
# - overlays over /usr and /etc (upper dirs in target/nvidia-host) hold
#   Debian's libnvidia-ml1 for amd64 and arm64 and libc6:arm64 (with
#   libgcc-s1:arm64) unpacked into their multiarch paths, linked as
#   nvidia-alternative links them, and the loader cache ldconfig rebuilds;
# - a tmpfs /dev holds this host's nodes and /dev/nvidiactl and nvidia0;
# - tmpfs over /sys/bus/pci/devices and /proc/driver show one NVIDIA GPU
#   bound to the driver, which lists it.
# The packages are downloaded, never installed (.ci/nvidia-real.sh for
# NVML, apt-get download for libc6:arm64), once: offline after that.
#
# Usage: .ci/nvidia-host.sh [--bin TEST_BINARY] [FILTER...]
#   TEST_BINARY: the integration test binary (default: cargo test --test
#   integration --no-run's, built out here); FILTERs: the tests to run
#   (default: DEFAULT_TESTS below), each with any --skip. The aarch64 unit
#   tests' runner (.cargo/config.toml) runs one module as well. Nothing is
#   built inside.
# A test that fails or hangs inside, or a process a test leaves behind,
# fails this script. Where the kernel refuses a mount namespace or
# overlayfs it skips, saying why; under CI=true that fails too.
#
# Without the fixes it holds (the exporter pointed at made-up roots, one
# sysroot for qemu's loader and libc), 9 tests fail here: the two arm64
# binary tests (the sysroot's loader with the host's libc spins; no
# address in 20 s), the two auto tests (the host's /dev/nvidia0), and 5
# fake-fleet tests that serve the host's GPU as a lost one; and the
# aarch64 unit tests hang.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/target/nvidia-host
# The host's GPU, on a bus no test's made-up fleet uses.
HOST_GPU=0000:e1:00.0
# The tests that read the host's NVML, /dev/nvidia*, PCI bus or driver,
# or whose qemu guest meets its multiarch libraries.
DEFAULT_TESTS=(
  arm64::
  sources::
  nvidia_real::
  lost::
  startup::
  gpu_check::
)
# The unit tests run under the aarch64 runner: a quick module of the
# sources crate.
UNIT_TESTS=host::
# A run that hangs fails after this many seconds.
LIMIT=300

# Overlays on /usr and /etc, the packages unpacked into them, ldconfig.
install_libraries() {
  local dir deb top stage=$WORK/stage
  for dir in usr etc; do
    mkdir -p "$WORK/overlay/$dir/upper" "$WORK/overlay/$dir/work"
    mount -t overlay "overlay-$dir" \
      -o "lowerdir=/$dir,upperdir=$WORK/overlay/$dir/upper,workdir=$WORK/overlay/$dir/work" "/$dir"
  done
  # Each package unpacked aside, then into the overlays: /lib is usr/lib
  # here (merged /usr), and tar would replace that link with a directory.
  for deb in "$WORK"/debs/*.deb "$ROOT"/target/nvidia-real/.debs/libnvidia-ml1_*.deb \
    "$ROOT"/target/nvidia-real-arm64/.debs/libnvidia-ml1_*.deb; do
    rm -rf "$stage"
    dpkg-deb -x "$deb" "$stage"
    for top in "$stage"/*; do
      case ${top##*/} in
        usr | etc) cp -a "$top/." "/${top##*/}/" ;;
        lib | lib64 | bin | sbin) cp -a "$top/." "/usr/${top##*/}/" ;;
        *) echo "nvidia-host.sh: $deb ships /${top##*/}, outside /usr and /etc" >&2; exit 1 ;;
      esac
    done
  done
  # nvidia-alternative's links, as the installed packages leave them.
  for triple in x86_64-linux-gnu aarch64-linux-gnu; do
    ln -sfn nvidia/current/libnvidia-ml.so.1 "/usr/lib/$triple/libnvidia-ml.so.1"
  done
  ldconfig
}

# /dev: this host's entries, bound one by one, without its NVIDIA nodes,
# plus nvidiactl and nvidia0 (char 195, as NVML's mknod makes them); the
# GPU on the PCI bus and in the driver's list (/proc is our own).
make_gpu_host() {
  local entry name
  mkdir -p "$WORK/hostdev"
  mount --rbind /dev "$WORK/hostdev"
  mount -t tmpfs -o mode=0755 nvidia-host-dev /dev
  for entry in "$WORK"/hostdev/* "$WORK"/hostdev/.[!.]*; do
    [[ -e $entry || -L $entry ]] || continue
    name=${entry##*/}
    [[ $name == nvidia* ]] && continue
    if [[ -L $entry ]]; then
      cp -P "$entry" "/dev/$name"
    elif [[ -d $entry ]]; then
      mkdir "/dev/$name" && mount --rbind "$entry" "/dev/$name"
    else
      touch "/dev/$name" && mount --bind "$entry" "/dev/$name"
    fi
  done
  mknod -m 0666 /dev/nvidiactl c 195 255
  mknod -m 0666 /dev/nvidia0 c 195 0
  local gpu=/sys/bus/pci/devices/$HOST_GPU
  mount -t tmpfs nvidia-host-pci /sys/bus/pci/devices
  mkdir "$gpu"
  echo 0x10de >"$gpu/vendor"
  echo 0x030200 >"$gpu/class"
  ln -s ../../../bus/pci/drivers/nvidia "$gpu/driver"
  mount -t tmpfs nvidia-host-driver /proc/driver
  mkdir -p "/proc/driver/nvidia/gpus/$HOST_GPU"
}

# The host is what it should be, or the check proves nothing. (An x86-64
# ldconfig leaves arm64 libraries out of its cache: an aarch64 loader
# finds them in its default directories, /lib/aarch64-linux-gnu first.)
check_host() {
  local want
  ldconfig -p | grep -qF 'libnvidia-ml.so.1 (libc6,x86-64)' ||
    { echo "nvidia-host.sh: no libnvidia-ml.so.1 in the loader cache" >&2; exit 1; }
  for want in /dev/nvidiactl /dev/nvidia0 "/sys/bus/pci/devices/$HOST_GPU/driver" \
    "/proc/driver/nvidia/gpus/$HOST_GPU" /lib/ld-linux-aarch64.so.1 \
    /lib/aarch64-linux-gnu/libc.so.6 /lib/aarch64-linux-gnu/libgcc_s.so.1 \
    /usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1; do
    [[ -e $want || -L $want ]] || { echo "nvidia-host.sh: no $want" >&2; exit 1; }
  done
  echo "nvidia-host.sh: libnvidia-ml1 amd64 and arm64, libc6:arm64, /dev/nvidiactl, GPU $HOST_GPU" >&2
}

# Every run, then whatever a test started must be gone: this is PID 1 of
# a PID namespace of its own, so anything left is a test's.
run_tests() {
  local bin=$1 filter p left=() failed=()
  shift
  for filter in "$@"; do
    # shellcheck disable=SC2086 # a filter may carry --skip NAME
    timeout -k 10 "$LIMIT" "$bin" $filter --test-threads 2 || failed+=("$filter")
  done
  if [[ -n $UNIT_TESTS ]]; then
    timeout -k 10 "$LIMIT" cargo test --offline --quiet --target aarch64-unknown-linux-gnu \
      -p gpu-exporter-sources --lib -- "$UNIT_TESTS" || failed+=("aarch64 $UNIT_TESTS")
  fi
  for p in /proc/[0-9]*; do
    [[ ${p##*/} != 1 && $(cat "$p/stat" 2>/dev/null) == *") "[!Z]" "* ]] || continue
    left+=("${p##*/}: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null)")
  done
  if ((${#left[@]})); then
    printf 'nvidia-host.sh: left behind by the tests: %s\n' "${left[@]}" >&2
    failed+=(processes)
  fi
  if ((${#failed[@]})); then
    echo "nvidia-host.sh: failed on a host with NVIDIA's libraries: ${failed[*]}" >&2
    exit 1
  fi
}

if [[ ${1:-} == --inside ]]; then
  shift
  install_libraries
  make_gpu_host
  check_host
  run_tests "$@"
  exit
fi

skip_or_fail() {
  if [[ ${CI:-} == true ]]; then
    echo "nvidia-host.sh: $1 (required in CI)" >&2
    exit 1
  fi
  echo "SKIP: nvidia-host.sh: $1" >&2
  exit 0
}

[[ $(id -u) -eq 0 ]] || skip_or_fail "needs root for a mount namespace, overlayfs and mknod"
# Can this kernel give us the namespaces and an overlay in them?
rm -rf "$WORK/overlay" "$WORK/stage" "$WORK/probe"
mkdir -p "$WORK/probe/lower" "$WORK/probe/upper" "$WORK/probe/work" "$WORK/probe/merged"
unshare --mount --propagation private --pid --fork mount -t overlay probe \
  -o "lowerdir=$WORK/probe/lower,upperdir=$WORK/probe/upper,workdir=$WORK/probe/work" \
  "$WORK/probe/merged" 2>"$WORK/probe.err" ||
  skip_or_fail "the kernel refuses a mount namespace or overlayfs: $(cat "$WORK/probe.err")"
rm -rf "$WORK/probe" "$WORK/probe.err"

if [[ ${1:-} == --bin ]]; then
  BIN=$(realpath "${2:?--bin needs the test binary}")
  shift 2
else
  # Built out here if it is not yet (cargo test --workspace has, in CI).
  # (Its artifact is the one of kind test; the exporter's binary is listed too.)
  BIN=$(cargo test --test integration --no-run --message-format=json |
    grep -F '"kind":["test"]' | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p')
fi
[[ -x $BIN ]] || { echo "nvidia-host.sh: no test binary ($BIN)" >&2; exit 1; }
(($#)) || set -- "${DEFAULT_TESTS[@]}"
# The aarch64 unit tests, built out here too, where that target is.
if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu &&
  command -v qemu-aarch64 >/dev/null; then
  cargo test --offline --quiet --target aarch64-unknown-linux-gnu --lib --no-run
elif [[ ${CI:-} == true ]]; then
  echo "nvidia-host.sh: the aarch64 target and qemu-aarch64 are required in CI" >&2
  exit 1
else
  echo "SKIP: nvidia-host.sh: the aarch64 unit tests (no aarch64 target or qemu-aarch64)" >&2
  UNIT_TESTS=
fi
export UNIT_TESTS

# The packages, fetched once.
.ci/nvidia-real.sh target/nvidia-real >/dev/null
.ci/nvidia-real.sh --arch arm64 target/nvidia-real-arm64 >/dev/null
if ! compgen -G "$WORK/debs/libc6_*_arm64.deb" >/dev/null ||
  ! compgen -G "$WORK/debs/libgcc-s1_*_arm64.deb" >/dev/null; then
  rm -rf "$WORK/debs"
  mkdir -p "$WORK/debs"
  # apt-get download as root drops to _apt, which must write there.
  chmod 0777 "$WORK/debs"
  # A stale index can name a version the mirror no longer has: update once.
  (cd "$WORK/debs" && apt-get download -q libc6:arm64 libgcc-s1:arm64 >&2) ||
    { apt-get update -qq >&2 && (cd "$WORK/debs" && apt-get download -q libc6:arm64 libgcc-s1:arm64 >&2); }
  chmod 0755 "$WORK/debs"
fi

start=$SECONDS
unshare --mount --propagation private --pid --fork --mount-proc "$0" --inside "$BIN" "$@"
echo "nvidia-host.sh: passed in $((SECONDS - start)) s" >&2
