#!/usr/bin/env bash
# Lays out the files of the scratch image (Dockerfile.scratch) in STAGE_DIR
# (default target/stage), which is then the build context:
#
#   deploy/container/stage.sh [--arch amd64|arm64] [STAGE_DIR]
#   buildah bud -f Dockerfile.scratch -t gpu-exporter:0.1.0 target/stage
#
# It builds the release binary the way it ships (deploy/build.sh), or
# takes an already built one from $GPU_EXPORTER_BIN, and copies in the
# binary, glibc's dynamic loader and the glibc libraries that the binary
# and libnvidia-ml.so.1 link, with symlinks resolved. --arch (default
# amd64) says which: amd64 takes this machine's own glibc
# (/lib64/ld-linux-x86-64.so.2, /lib/x86_64-linux-gnu); arm64 builds
# --target aarch64-unknown-linux-gnu and takes the glibc of Debian's cross
# sysroot, /usr/aarch64-linux-gnu/lib (libc6-dev-arm64-cross; $ARM64_SYSROOT
# overrides it), staged as /lib/ld-linux-aarch64.so.1 and
# /lib/aarch64-linux-gnu. deploy/release.sh stages both. Beside them,
# dcgm-exporter's counters files in /etc/dcgm-exporter (for the image's
# dcgm target). Nothing else: NVML is dlopened, so
# the binary must be glibc-linked (a static binary cannot dlopen), and the
# driver's libraries are mounted in at run time by the NVIDIA container
# toolkit.
#
# With --static it stages the simulator-only image (Dockerfile.static) in
# STAGE_DIR (default target/stage-static): the x86_64-unknown-linux-musl
# build alone (`rustup target add x86_64-unknown-linux-musl` first).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
musl=x86_64-unknown-linux-musl
static=false
arch=amd64
while (($#)); do
  case "$1" in
    --static) static=true ;;
    --arch) arch="$2"; shift ;;
    --arch=*) arch="${1#--arch=}" ;;
    *) break ;;
  esac
  shift
done
case "$arch" in
  amd64)
    triple=x86_64-unknown-linux-gnu multiarch=x86_64-linux-gnu
    loader=/lib64/ld-linux-x86-64.so.2 machine=X86-64 ;;
  arm64)
    triple=aarch64-unknown-linux-gnu multiarch=aarch64-linux-gnu
    loader=/lib/ld-linux-aarch64.so.1 machine=AArch64 ;;
  *) echo "stage.sh: --arch is amd64 or arm64, not '$arch'" >&2; exit 2 ;;
esac
if $static && [[ $arch != amd64 ]]; then
  echo "stage.sh: the static image is amd64 only" >&2
  exit 2
fi
if $static; then
  stage="${1:-$root/target/stage-static}"
else
  stage="${1:-$root/target/stage}"
fi

if [[ -n "${GPU_EXPORTER_BIN:-}" ]]; then
  bin="$GPU_EXPORTER_BIN"
elif $static; then
  # Without default features: a demo needs no TLS, and ring's C and
  # assembly would need a musl C toolchain.
  (cd "$root" && cargo build --release --locked --no-default-features --bin gpu-exporter --target "$musl")
  bin="${CARGO_TARGET_DIR:-$root/target}/$musl/release/gpu-exporter"
elif [[ $arch == amd64 ]]; then
  bin="$("$root/deploy/build.sh")"
else
  bin="$("$root/deploy/build.sh" --target "$triple")"
fi
[[ -x "$bin" ]] || { echo "stage.sh: $bin is not an executable" >&2; exit 1; }

if $static; then
  if readelf -l "$bin" | grep -q 'program interpreter' || readelf -d "$bin" | grep -q '(NEEDED)'; then
    echo "stage.sh: $bin is not a static binary" >&2
    exit 1
  fi
  rm -rf "$stage"
  mkdir -p "$stage/usr/bin"
  install -m 0755 "$bin" "$stage/usr/bin/gpu-exporter"
  chmod -R u=rwX,go=rX "$stage"
  echo "staged $(du -sb "$stage" | cut -f1) bytes in $stage" >&2
  exit 0
fi

interp="$(readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
[[ "$interp" == "$loader" ]] ||
  { echo "stage.sh: $bin wants loader '$interp', not $loader ($arch glibc)" >&2; exit 1; }
readelf -h "$bin" | grep -q "Machine:.*$machine" ||
  { echo "stage.sh: $bin is not an $machine binary ($arch)" >&2; exit 1; }

# The directory one glibc build's libraries all come from: for amd64 the
# one this machine's libc.so.6 lives in; for arm64 the cross sysroot.
if [[ $arch == amd64 ]]; then
  libdir="$(dirname "$(ldd "$bin" | awk '$1 == "libc.so.6" { print $3 }')")"
else
  libdir="${ARM64_SYSROOT:-/usr/aarch64-linux-gnu}/lib"
fi
[[ -e "$libdir/libc.so.6" && -e "$libdir/$(basename "$loader")" ]] ||
  { echo "stage.sh: no $arch glibc (libc.so.6, $(basename "$loader")) in '$libdir'" >&2; exit 1; }

# What the binary links (libc and libgcc_s in the shipped build), plus what
# libnvidia-ml.so.1 links: libc, libm, libdl, libpthread and librt. Since
# glibc 2.34 the last three are stubs, kept because the driver names them.
libs=(libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1)
for needed in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  [[ " ${libs[*]} " == *" $needed "* ]] || libs+=("$needed")
done

rm -rf "$stage"
mkdir -p "$stage/usr/bin" "$stage$(dirname "$loader")" "$stage/lib/$multiarch" "$stage/etc" \
  "$stage/usr/lib/$multiarch" "$stage/usr/lib64"
install -m 0755 "$bin" "$stage/usr/bin/gpu-exporter"
# The loader from the same glibc as the libraries.
install -m 0755 "$(readlink -f "$libdir/$(basename "$loader")")" "$stage$loader"
for lib in "${libs[@]}"; do
  [[ -e "$libdir/$lib" ]] || { echo "stage.sh: $libdir/$lib is missing" >&2; exit 1; }
  install -m 0644 "$(readlink -f "$libdir/$lib")" "$stage/lib/$multiarch/$lib"
done

# Every library a staged file links must itself be staged.
for f in "$stage/usr/bin/gpu-exporter" "$stage/lib/$multiarch"/*; do
  for needed in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ -e "$stage/lib/$multiarch/$needed" || "/$needed" == "$loader" ||
      "$needed" == "$(basename "$loader")" ]] ||
      { echo "stage.sh: $(basename "$f") needs $needed, which is not staged" >&2; exit 1; }
  done
done

# The driver directories the NVIDIA container toolkit mounts into (legacy
# mode picks /usr/lib64 for an image without /etc/debian_version; CDI uses
# the host's path), present so nothing is created in the image at start.
# /etc exists so a toolkit that runs ldconfig can write /etc/ld.so.cache,
# and this file makes that cache cover both directories.
printf '%s\n' "/usr/lib/$multiarch" /usr/lib64 >"$stage/etc/ld.so.conf"
# dcgm-exporter's three counters files where its Helm chart and the GPU
# Operator look for them (-f, DCGM_EXPORTER_COLLECTORS), with their
# Apache-2.0 notice and licence (docs/migrating-from-dcgm-exporter.md).
mkdir -p "$stage/etc/dcgm-exporter"
for f in default-counters.csv dcp-metrics-included.csv 1.x-compatibility-metrics.csv; do
  install -m 0644 "$root/tests/fixtures/dcgm/$f" "$stage/etc/dcgm-exporter/$f"
done
install -m 0644 "$root/deploy/container/dcgm-exporter.NOTICE" "$stage/etc/dcgm-exporter/NOTICE"
install -m 0644 "$root/LICENSE" "$stage/etc/dcgm-exporter/LICENSE"
chmod -R u=rwX,go=rX "$stage"
echo "staged $(du -sb "$stage" | cut -f1) bytes in $stage" >&2
