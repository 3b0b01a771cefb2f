#!/usr/bin/env bash
# The real NVIDIA driver's NVML (libnvidia-ml1) and nvidia-smi, from
# Debian's non-free component, for the tests that run them
# (tests/integration/nvidia_real.rs and the image test): downloaded with
# apt-get download and unpacked with dpkg-deb -x, NEVER installed.
#
# Usage: .ci/nvidia-real.sh [--source-only] [--arch amd64|arm64] [DEST]
#   amd64 (the default): libnvidia-ml1 and nvidia-smi into DEST (default
#   target/nvidia-real). arm64: libnvidia-ml1:arm64 alone into DEST (default
#   target/nvidia-real-arm64), for the aarch64 build under qemu-user
#   (tests/integration/arm64.rs); a foreign architecture is added to dpkg
#   (dpkg --add-architecture arm64, then apt-get update) so that apt can
#   download its packages, which are still never installed.
# Env:   NVIDIA_DEB_VERSION=535.261.03-1  pin a version (default: apt's
#        candidate, the newest of bookworm / bookworm-security non-free)
#        APT_ETC=/etc/apt                 where the apt sources are
# Prints, on success, two lines (the second for amd64 only):
#   NVML_LIB=<DEST>/usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1
#   NVIDIA_SMI=<DEST>/usr/lib/nvidia/current/nvidia-smi
# nvidia-smi needs LD_LIBRARY_PATH=$(dirname "$NVML_LIB").
#
# Apt source: the machine's Debian source is not edited. A file
# /etc/apt/sources.list.d/gpu-exporter-non-free.sources is added that
# mirrors every enabled Debian (and debian-security: the candidate is a
# security update) stanza or line, same URIs, Suites and Signed-By, with
# "Components: non-free" only; deb822 and one-line formats both. Skipped
# where a source already names non-free. Idempotent: a DEST holding both
# files returns at once, without touching apt.
set -euo pipefail

ARCH=amd64
# --source-only: write the non-free source file (step 1) and stop; for
# the test that holds it to one stanza per archive.
SOURCE_ONLY=false
if [[ ${1:-} == --source-only ]]; then
  SOURCE_ONLY=true
  shift
fi
if [[ ${1:-} == --arch ]]; then
  ARCH=${2:?--arch needs amd64 or arm64}
  shift 2
fi
case $ARCH in
  amd64)
    DEST=${1:-target/nvidia-real}
    LIB_REL=usr/lib/x86_64-linux-gnu/nvidia/current/libnvidia-ml.so.1
    SMI_REL=usr/lib/nvidia/current/nvidia-smi
    PKGS=(libnvidia-ml1:amd64 nvidia-smi:amd64) ;;
  arm64)
    DEST=${1:-target/nvidia-real-arm64}
    LIB_REL=usr/lib/aarch64-linux-gnu/nvidia/current/libnvidia-ml.so.1
    SMI_REL=
    PKGS=(libnvidia-ml1:arm64) ;;
  *) echo "fetch.sh: --arch is amd64 or arm64, not '$ARCH'" >&2; exit 2 ;;
esac
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
VERSION=${NVIDIA_DEB_VERSION:-}
APT_ETC=${APT_ETC:-/etc/apt}
NONFREE_FILE=$APT_ETC/sources.list.d/gpu-exporter-non-free.sources

done_already() {
  [[ -f $DEST/$LIB_REL && -f $DEST/.fetched ]] || return 1
  [[ -z $SMI_REL || -x $DEST/$SMI_REL ]] || return 1
  # a pinned version must be the one already extracted
  [[ -z $VERSION ]] || [[ $(grep -c " Version: $VERSION\$" "$DEST/.fetched") -eq ${#PKGS[@]} ]]
}

report() {
  echo "NVML_LIB=$DEST/$LIB_REL"
  [[ -z $SMI_REL ]] || echo "NVIDIA_SMI=$DEST/$SMI_REL"
}

if ! $SOURCE_ONLY && done_already; then
  report
  exit 0
fi

SUDO=
[[ $(id -u) -eq 0 ]] || SUDO=sudo

# A foreign architecture's packages are only downloadable once dpkg knows it.
added_arch=false
if ! $SOURCE_ONLY && [[ $(dpkg --print-architecture) != "$ARCH" ]] &&
  ! dpkg --print-foreign-architectures | grep -qx "$ARCH"; then
  $SUDO dpkg --add-architecture "$ARCH"
  added_arch=true
  echo "fetch.sh: added dpkg architecture $ARCH" >&2
fi

# --- 1. a non-free source mirroring the existing Debian one(s) -------------
# Does any enabled source already carry non-free for a Debian archive?
has_nonfree() {
  # a non-comment line naming the component "non-free" (not non-free-firmware)
  cat "$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list "$APT_ETC"/sources.list.d/*.sources 2>/dev/null \
    | grep -v '^[[:space:]]*#' | grep -Eq '(^|[[:space:]])non-free([[:space:]]|$)' 
}

write_nonfree_source() {
  local out stanzas=""
  # deb822: copy each enabled stanza whose URIs point at a Debian archive,
  # replacing Components with non-free.
  shopt -s nullglob
  local f
  for f in "$APT_ETC"/sources.list.d/*.sources; do
    [[ $f == "$NONFREE_FILE" ]] && continue
    out=$(awk '
      function flush() {
        if (buf != "" && debian && !disabled && isdeb) {
          printf "%s", buf; print "Components: non-free"; print ""
        }
        buf = ""; debian = 0; disabled = 0; isdeb = 0
      }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      {
        key = tolower($1)
        if (key == "components:") next
        if (key == "uris:" && $0 ~ /\/debian(-security)?\/?([ \t]|$)/) debian = 1
        if (key == "types:" && $0 ~ /(^|[ \t])deb([ \t]|$)/) isdeb = 1
        if (key == "enabled:" && tolower($2) == "no") disabled = 1
        if (key == "types:") { buf = buf "Types: deb\n"; next }
        buf = buf $0 "\n"
      }
      END { flush() }' "$f")
    [[ -z $out ]] || stanzas+=$out$'\n\n'
  done
  # one-line format: deb [opts] URI suite components...
  local lists=("$APT_ETC"/sources.list "$APT_ETC"/sources.list.d/*.list)
  for f in "${lists[@]}"; do
    [[ -f $f ]] || continue
    out=$(awk '
      /^[ \t]*deb[ \t]/ {
        i = 2; opts = ""
        if ($2 ~ /^\[/) { while ($i !~ /\]$/) { opts = opts " " $i; i++ } opts = opts " " $i; i++ }
        uri = $i; suite = $(i+1)
        if (uri !~ /\/debian(-security)?\/?$/) next
        gsub(/^ *\[|\] *$/, "", opts)
        print "Types: deb"; print "URIs: " uri; print "Suites: " suite
        n = split(opts, o, " ")
        for (k = 1; k <= n; k++) if (o[k] ~ /^signed-by=/) { sub(/^signed-by=/, "", o[k]); print "Signed-By: " o[k] }
        print "Components: non-free"; print ""
      }' "$f")
    [[ -z $out ]] || stanzas+=$out$'\n\n'
  done
  # The same archive and suites named in two files (sources.list and a
  # .sources file, as some images have) is one stanza, the first: apt
  # warns of a source configured twice, and refuses two Signed-By values.
  stanzas=$(printf '%s' "$stanzas" | awk '
    BEGIN { RS = ""; ORS = "\n\n" }
    { key = ""; n = split($0, l, "\n")
      for (i = 1; i <= n; i++) if (l[i] ~ /^(URIs|Suites):/) key = key l[i] "\n"
      if (!seen[key]++) print }')
  if [[ -z $stanzas ]]; then
    echo "fetch.sh: no enabled Debian archive source found in $APT_ETC to mirror" >&2
    exit 1
  fi
  printf '# Added by gpu-exporter fetch.sh: Debian non-free (libnvidia-ml1, nvidia-smi),\n# mirroring the existing Debian source(s).\n%s' "$stanzas" \
    | $SUDO tee "$NONFREE_FILE.tmp" >/dev/null
  $SUDO mv "$NONFREE_FILE.tmp" "$NONFREE_FILE"
  echo "fetch.sh: wrote $NONFREE_FILE" >&2
}

if ! has_nonfree; then
  [[ -f $NONFREE_FILE ]] || write_nonfree_source
fi
if $SOURCE_ONLY; then
  exit 0
fi

# --- 2. apt-get update (only when the non-free index is not there yet) ----
need_update=$added_arch
for pkg in "${PKGS[@]}"; do
  apt-cache show "$pkg" >/dev/null 2>&1 || need_update=true
done
if $need_update; then
  $SUDO apt-get update -qq >&2
fi

# --- 3. download + extract -------------------------------------------------
DEBS=$DEST/.debs
rm -rf "$DEBS"
mkdir -p "$DEBS"
# apt-get download writes into the current directory; as root it drops
# privileges to _apt, which must be able to write there.
chmod 0777 "$DEBS" 2>/dev/null || true
# A stale index can name a version the mirror no longer has: update once, retry.
WANT=("${PKGS[@]}")
[[ -z $VERSION ]] || WANT=("${PKGS[@]/%/=$VERSION}")
[[ ${#WANT[@]} -eq ${#PKGS[@]} ]]
if ! (cd "$DEBS" && apt-get download -q "${WANT[@]}" >&2); then
  $SUDO apt-get update -qq >&2
  (cd "$DEBS" && apt-get download -q "${WANT[@]}" >&2)
fi
chmod 0755 "$DEBS"
# a previous version's files must not linger
if [[ -f $DEST/.fetched ]]; then
  rm -rf "$DEST/usr" "$DEST/.fetched"
fi
for deb in "$DEBS"/*.deb; do
  dpkg-deb -x "$deb" "$DEST"
done
if [[ ! -f $DEST/$LIB_REL ]] || [[ -n $SMI_REL && ! -x $DEST/$SMI_REL ]]; then
  echo "fetch.sh: expected files missing after extraction:" >&2
  ls -l "$DEST/$LIB_REL" ${SMI_REL:+"$DEST/$SMI_REL"} >&2 || true
  exit 1
fi
for deb in "$DEBS"/*.deb; do
  dpkg-deb -f "$deb" Package Version | paste -sd' '
done > "$DEST/.fetched"
report
