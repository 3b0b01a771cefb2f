#!/usr/bin/env bash
# Lays out the files of the scratch image (Dockerfile.scratch) in STAGE_DIR
# (default target/stage), which is then the build context:
#
#   deploy/container/stage.sh [STAGE_DIR]
#   buildah bud -f Dockerfile.scratch -t gpu-exporter:0.1.0 target/stage
#
# It builds the release binary the way it ships (deploy/release.sh), or
# takes an already built one from $GPU_EXPORTER_BIN, and copies in the binary, glibc's dynamic loader and
# the glibc libraries that the binary and libnvidia-ml.so.1 link, taken from
# this machine with symlinks resolved. Nothing else: NVML is dlopened, so
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
if [[ "${1:-}" == --static ]]; then
  static=true
  shift
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
else
  bin="$("$root/deploy/release.sh")"
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

loader=/lib64/ld-linux-x86-64.so.2
interp="$(readelf -l "$bin" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
[[ "$interp" == "$loader" ]] ||
  { echo "stage.sh: $bin wants loader '$interp', not $loader (x86-64 glibc)" >&2; exit 1; }

# The directory this machine's libc.so.6 lives in: every library comes from
# there, so they all belong to one glibc build.
libdir="$(dirname "$(ldd "$bin" | awk '$1 == "libc.so.6" { print $3 }')")"
[[ -d "$libdir" ]] || { echo "stage.sh: cannot find libc.so.6 of $bin" >&2; exit 1; }

# What the binary links (libc alone in the shipped build), plus what
# libnvidia-ml.so.1 links: libc, libm, libdl, libpthread and librt. Since
# glibc 2.34 the last three are stubs, kept because the driver names them.
libs=(libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1)
for needed in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
  [[ " ${libs[*]} " == *" $needed "* ]] || libs+=("$needed")
done

rm -rf "$stage"
mkdir -p "$stage/usr/bin" "$stage/lib64" "$stage/lib/x86_64-linux-gnu" "$stage/etc" \
  "$stage/usr/lib/x86_64-linux-gnu" "$stage/usr/lib64"
install -m 0755 "$bin" "$stage/usr/bin/gpu-exporter"
install -m 0755 "$(readlink -f "$loader")" "$stage$loader"
for lib in "${libs[@]}"; do
  [[ -e "$libdir/$lib" ]] || { echo "stage.sh: $libdir/$lib is missing" >&2; exit 1; }
  install -m 0644 "$(readlink -f "$libdir/$lib")" "$stage/lib/x86_64-linux-gnu/$lib"
done

# Every library a staged file links must itself be staged.
for f in "$stage/usr/bin/gpu-exporter" "$stage"/lib/x86_64-linux-gnu/*; do
  for needed in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    [[ -e "$stage/lib/x86_64-linux-gnu/$needed" || "/$needed" == "$loader" ||
      "$needed" == "ld-linux-x86-64.so.2" ]] ||
      { echo "stage.sh: $(basename "$f") needs $needed, which is not staged" >&2; exit 1; }
  done
done

# The driver directories the NVIDIA container toolkit mounts into (legacy
# mode picks /usr/lib64 for an image without /etc/debian_version; CDI uses
# the host's path), present so nothing is created in the image at start.
# /etc exists so a toolkit that runs ldconfig can write /etc/ld.so.cache,
# and this file makes that cache cover both directories.
printf '%s\n' /usr/lib/x86_64-linux-gnu /usr/lib64 >"$stage/etc/ld.so.conf"
chmod -R u=rwX,go=rX "$stage"
echo "staged $(du -sb "$stage" | cut -f1) bytes in $stage" >&2
