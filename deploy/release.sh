#!/usr/bin/env bash
# The release: both architectures' binaries, tarballs, an SBOM, checksums
# and one multi-arch image (an OCI image index), written to dist/:
#
#   deploy/release.sh [--push REGISTRY] VERSION
#   deploy/release.sh --binary [deploy/build.sh flags...]
#
# --binary only builds the binary the way it ships and prints its path:
# it is deploy/build.sh (`cargo build --release --locked`, see there).
#
# A release builds linux/amd64 and linux/arm64 (aarch64-unknown-linux-gnu,
# cross-linked by Debian's gcc-aarch64-linux-gnu, .cargo/config.toml) with
# `cargo auditable build`, so each binary carries its dependency list
# (rust-audit-info reads it back), stages each image with
# deploy/container/stage.sh --arch, and builds Dockerfile.scratch for each
# platform into one manifest list with buildah. It writes to $DIST
# (default dist/):
#
#   gpu-exporter-VERSION-linux-amd64.tar.gz   the binary, README.md,
#   gpu-exporter-VERSION-linux-arm64.tar.gz   docs/, LICENSE and deploy/
#   gpu-exporter-VERSION.cdx.json             CycloneDX SBOM of the crates
#   gpu-exporter-VERSION-image.oci.tar        the image index, OCI archive
#   gpu-exporter-VERSION-dcgm-image.oci.tar   the -dcgm tag's index (the
#                                             Dockerfile's dcgm target, which
#                                             starts as dcgm-exporter)
#   gpu-exporter-VERSION.tgz                  the Helm chart (docs/helm.md)
#   gpu-exporter_PKGVERSION_ARCH.deb          packages with the systemd unit
#   gpu-exporter-PKGVERSION-1.ARCH.rpm        (deploy/package.sh), both archs
#   SHA256SUMS                                `sha256sum -c SHA256SUMS`
#
# The deploy/ in each tarball names the image IMAGE=[REGISTRY/]gpu-exporter:VERSION
# (the manifests' one image reference, `gpu-exporter:0.1.0` in the source
# tree; gpu-exporter:0.1.0-dcgm, the dcgm target, becomes IMAGE-dcgm).
# --push REGISTRY copies both indexes there (skopeo copy --all) as
# REGISTRY/gpu-exporter:VERSION and :VERSION-dcgm, and the chart as an OCI
# artifact, oci://REGISTRY/charts/gpu-exporter:VERSION; a registry on
# localhost or 127.0.0.1 is spoken to over plain HTTP, as docker does.
#
# The chart's version and appVersion are VERSION (Helm wants it semver),
# its image [REGISTRY/]gpu-exporter, in the tarballs' deploy/helm too; it
# is packaged and pushed with Helm's own Go SDK from PyPI helm-python-sdk
# (tests/helm/requirements.txt; x86_64 wheels only), no helm binary.
#
# Needs: cargo-auditable (cargo install --locked cargo-auditable), the
# aarch64 target and cross gcc, buildah, python3 (the SBOM, from `cargo
# metadata`), helm-python-sdk (the chart), dpkg-deb and rpmbuild (Debian's
# rpm; the packages), and skopeo for --push. Env: CARGO_TARGET_DIR, DIST,
# CARGO_FLAGS (extra cargo flags, e.g. "--offline -j1"), BUILDAH_FLAGS
# (global buildah flags, e.g. "--root DIR --runroot DIR"),
# SOURCE_DATE_EPOCH (default: the last commit's time).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ "${1:-}" == --binary ]]; then
  shift
  exec "$root/deploy/build.sh" "$@"
fi
registry=
while (($#)); do
  case "$1" in
    --push) registry="${2:?--push needs a REGISTRY}"; shift ;;
    --push=*) registry="${1#--push=}" ;;
    -*) echo "release.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
  shift
done
version="${1:-}"
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z.+_-]*$ && $# -eq 1 ]] ||
  { echo "usage: deploy/release.sh [--push REGISTRY] VERSION" >&2; exit 2; }
registry="${registry%/}"
cd "$root"
cargo auditable --version >/dev/null 2>&1 ||
  { echo "release.sh: cargo-auditable is missing (cargo install --locked cargo-auditable)" >&2; exit 1; }
if [[ -n $registry ]]; then
  command -v skopeo >/dev/null || { echo "release.sh: --push needs skopeo" >&2; exit 1; }
fi
python3 -c 'import helm_python' 2>/dev/null ||
  { echo "release.sh: the chart needs helm-python-sdk (python3 -m pip install --require-hashes -r tests/helm/requirements.txt)" >&2; exit 1; }
plain_http=
[[ $registry == localhost[:/]* || $registry == 127.0.0.1[:/]* || $registry == localhost ]] && plain_http=1
dist="${DIST:-$root/dist}"
target="${CARGO_TARGET_DIR:-$root/target}"
# Not exported: ring's build script (through cc) reruns when
# SOURCE_DATE_EPOCH changes, and the builds must find the tests' ones fresh.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
read -ra cargo_flags <<<"${CARGO_FLAGS:-}"
read -ra buildah <<<"buildah ${BUILDAH_FLAGS:-}"
image="${registry:+$registry/}gpu-exporter:$version"
name="gpu-exporter-release:$version"
archive="gpu-exporter-$version-image.oci.tar"
archive_dcgm="gpu-exporter-$version-dcgm-image.oci.tar"
mkdir -p "$dist"
rm -f "$dist/SHA256SUMS" "$dist/gpu-exporter-$version"[-.]* \
  "$dist/gpu-exporter_${version//-/\~}_"*.deb "$dist/gpu-exporter-${version//-/\~}-1."*.rpm

# --- the Helm chart ---------------------------------------------------------
# As this release ships it: its image the one built here, its version and
# appVersion VERSION; the dashboards' link resolved into a copy.
chart="$target/release-stage/chart/gpu-exporter"
rm -rf "$target/release-stage/chart"
mkdir -p "$target/release-stage/chart"
cp -R deploy/helm/gpu-exporter "$chart"
rm "$chart/files/dashboards"
cp -R deploy/grafana "$chart/files/dashboards"
sed -i -E -e "s#^version: .*#version: $version#" -e "s#^appVersion: .*#appVersion: \"$version\"#" "$chart/Chart.yaml"
sed -i -E "s#^(  repository: )gpu-exporter\$#\1${registry:+$registry/}gpu-exporter#" "$chart/values.yaml"
python3 - "$chart" "$dist" "$version" <<'PY' >/dev/null
import sys
import helm_python as helm
chart, dist, version = sys.argv[1:]
print(helm.package(chart, destination=dist, version=version, app_version=version))
PY
[[ -f "$dist/gpu-exporter-$version.tgz" ]] || { echo "release.sh: no chart gpu-exporter-$version.tgz" >&2; exit 1; }

# --- binaries, stages and tarballs ----------------------------------------
tarballs=()
packages=()
for arch in amd64 arm64; do
  case $arch in
    amd64) build=() ;;
    arm64) build=(--target aarch64-unknown-linux-gnu) ;;
  esac
  bin="$("$root/deploy/build.sh" --auditable "${build[@]}" "${cargo_flags[@]}")"
  stage="$target/release-stage/$arch"
  GPU_EXPORTER_BIN="$bin" "$root/deploy/container/stage.sh" --arch "$arch" "$stage"

  pkg="gpu-exporter-$version-linux-$arch"
  tree="$target/release-stage/$pkg"
  rm -rf "$tree"
  mkdir -p "$tree"
  install -m 0755 "$bin" "$tree/gpu-exporter"
  install -m 0644 README.md LICENSE "$tree/"
  cp -R docs "$tree/docs"
  cp -R deploy "$tree/deploy"
  rm -rf "$tree/deploy/helm/gpu-exporter"
  cp -R "$chart" "$tree/deploy/helm/gpu-exporter"
  # The manifests' one image reference, filled in for this release.
  find "$tree/deploy" -name '*.yaml' -exec sed -i -E \
    -e "/-dcgm[[:space:]]*\$/!s#^([[:space:]]*image:[[:space:]]*)gpu-exporter:[0-9A-Za-z.+_-]+[[:space:]]*\$#\\1$image#" \
    -e "s#^([[:space:]]*image:[[:space:]]*)gpu-exporter:[0-9A-Za-z.+_-]+-dcgm[[:space:]]*\$#\\1$image-dcgm#" {} +
  grep -rqF "image: $image" "$tree/deploy/kubernetes" ||
    { echo "release.sh: no manifest names $image" >&2; exit 1; }
  chmod -R u=rwX,go=rX "$tree"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" \
    -C "$(dirname "$tree")" -cf - "$pkg" | gzip -9n >"$dist/$pkg.tar.gz"
  tarballs+=("$pkg.tar.gz")
  while read -r built; do
    packages+=("$(basename "$built")")
  done < <("$root/deploy/package.sh" "$arch" "$version" "$bin" "$dist")
done

# --- the SBOM ---------------------------------------------------------------
# Offline: the builds above fetched every crate for the two platforms.
cargo metadata --format-version 1 --locked --offline \
  --filter-platform x86_64-unknown-linux-gnu --filter-platform aarch64-unknown-linux-gnu \
  >"$target/release-stage/metadata.json"
SOURCE_DATE_EPOCH="$epoch" python3 "$root/deploy/sbom.py" "$version" <"$target/release-stage/metadata.json" \
  >"$dist/gpu-exporter-$version.cdx.json"

# --- the image indexes ----------------------------------------------------
# The default target as VERSION, the dcgm target as VERSION-dcgm.
for variant in default dcgm; do
  case $variant in
    default) index="$name" which=() out="$archive" tag="$version" ;;
    dcgm) index="$name-dcgm" which=(--target dcgm) out="$archive_dcgm" tag="$version-dcgm" ;;
  esac
  "${buildah[@]}" manifest rm "$index" >/dev/null 2>&1 || true
  "${buildah[@]}" manifest create "$index" >/dev/null
  for arch in amd64 arm64; do
    "${buildah[@]}" bud --quiet --isolation chroot --platform "linux/$arch" \
      --manifest "$index" --timestamp "$epoch" "${which[@]}" \
      --label "org.opencontainers.image.version=$version" \
      --label "org.opencontainers.image.licenses=Apache-2.0" \
      -f Dockerfile.scratch "$target/release-stage/$arch" >/dev/null
  done
  "${buildah[@]}" manifest push --quiet --all "$index" "oci-archive:$dist/$out:gpu-exporter:$tag"
done

(cd "$dist" && sha256sum "${tarballs[@]}" "gpu-exporter-$version.cdx.json" "$archive" "$archive_dcgm" \
  "gpu-exporter-$version.tgz" "${packages[@]}" >SHA256SUMS)

if [[ -n $registry ]]; then
  tls=()
  [[ -n $plain_http ]] && tls=(--dest-tls-verify=false)
  skopeo copy --quiet --all "${tls[@]}" "oci-archive:$dist/$archive" "docker://$image" >&2
  skopeo copy --quiet --all "${tls[@]}" "oci-archive:$dist/$archive_dcgm" "docker://$image-dcgm" >&2
  echo "release.sh: pushed $image and $image-dcgm" >&2
  python3 - "$dist/gpu-exporter-$version.tgz" "oci://$registry/charts" "$plain_http" <<'PY' >&2
import sys
import helm_python as helm
tgz, remote, plain = sys.argv[1:]
helm.push(tgz, remote, plain_http=bool(plain))
print(f"release.sh: pushed {remote}/gpu-exporter")
PY
fi
"${buildah[@]}" manifest rm "$name" >/dev/null 2>&1 || true
"${buildah[@]}" manifest rm "$name-dcgm" >/dev/null 2>&1 || true
echo "release.sh: $image in $dist:" >&2
(cd "$dist" && ls -l "${tarballs[@]}" "gpu-exporter-$version.cdx.json" "$archive" "$archive_dcgm" \
  "gpu-exporter-$version.tgz" "${packages[@]}" SHA256SUMS >&2)
