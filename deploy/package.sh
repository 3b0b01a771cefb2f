#!/usr/bin/env bash
# Packages for hosts without Kubernetes: one architecture's binary as a
# .deb (dpkg-deb) and an .rpm (rpmbuild, Debian's `rpm`), with the systemd
# units of deploy/systemd/:
#
#   deploy/package.sh ARCH VERSION BINARY DEST     # ARCH: amd64 or arm64
#
# Writes DEST/gpu-exporter_PKGVERSION_ARCH.deb and
# DEST/gpu-exporter-PKGVERSION-1.RPMARCH.rpm, PKGVERSION being VERSION with
# each - as ~ (a pre-release sorts before its release in dpkg and rpm).
# deploy/release.sh runs it for both architectures.
#
# What they install (docs/deploy.md, Packages):
#   /usr/bin/gpu-exporter
#   /usr/lib/systemd/system/gpu-exporter.service   deploy/systemd's unit, run
#       from /usr/bin with the flags of /etc/default/gpu-exporter (the .deb)
#       or /etc/sysconfig/gpu-exporter (the .rpm), as the system user
#       gpu-exporter the package creates with systemd-sysusers
#       (/usr/lib/sysusers.d/gpu-exporter.conf; DynamicUser= keeps its
#       sandbox and takes an existing user of that name)
#   /usr/lib/systemd/system/gpu-exporter.socket    socket activation, off
#   /etc/default/gpu-exporter, /etc/sysconfig/...  config: kept on upgrade
#       and on removal (purge removes it; the user stays, as Debian keeps
#       system users)
#   /etc/gpu-exporter/                             for web-config.yml and
#       its certificates (the unit's #tls| lines), root's, 0700
#   /usr/share/doc/gpu-exporter/, the licence, docs/runbooks/
# Neither enables nor starts the service: `systemctl enable --now gpu-exporter`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[[ $# -eq 4 ]] || { echo "usage: deploy/package.sh ARCH VERSION BINARY DEST" >&2; exit 2; }
arch=$1 version=$2 bin=$3 dest=$4
case $arch in
  amd64) rpmarch=x86_64 ;;
  arm64) rpmarch=aarch64 ;;
  *) echo "package.sh: ARCH is amd64 or arm64, not $arch" >&2; exit 2 ;;
esac
[[ $version =~ ^[0-9][0-9A-Za-z.+~-]*$ ]] || { echo "package.sh: bad VERSION $version" >&2; exit 2; }
pkgver=${version//-/\~}
epoch="${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"

# The unit as packaged, from deploy/systemd's: the flags from the config
# file, the package's user. Each edit is checked, so a changed source unit
# fails here rather than ships unedited.
unit() { # $1: the config file
  local out
  out="$(sed -e '1,3d' \
    -e "s#^\[Service\]\$#[Service]\nEnvironmentFile=-$1#" \
    -e 's#/usr/local/bin/gpu-exporter --source nvml#/usr/bin/gpu-exporter $GPU_EXPORTER_ARGS#' \
    -e 's#^DynamicUser=yes$#DynamicUser=yes\nUser=gpu-exporter\nGroup=gpu-exporter#' \
    "$root/deploy/systemd/gpu-exporter.service")"
  for want in "EnvironmentFile=-$1" 'ExecStart=/usr/bin/gpu-exporter $GPU_EXPORTER_ARGS' 'User=gpu-exporter'; do
    grep -qxF "$want" <<<"$out" || { echo "package.sh: the unit has no $want" >&2; exit 1; }
  done
  printf '# gpu-exporter, as its package installs it: flags in %s.\n%s\n' "$1" "$out"
}

# The files both packages install, under $1, the unit reading $2.
tree() {
  local t=$1 conf=$2
  install -D -m 0755 "$bin" "$t/usr/bin/gpu-exporter"
  install -d -m 0755 "$t/usr/lib/systemd/system" "$t/usr/share/doc/gpu-exporter/runbooks"
  unit "$conf" >"$t/usr/lib/systemd/system/gpu-exporter.service"
  install -m 0644 "$root/deploy/systemd/gpu-exporter.socket" "$t/usr/lib/systemd/system/"
  install -D -m 0644 /dev/stdin "$t$conf" <<'EOF'
# gpu-exporter's flags (docs/flags.md), read by its systemd unit; then
# `systemctl restart gpu-exporter`. With a web config in /etc/gpu-exporter,
# see the unit's #tls| lines (docs/http-and-security.md).
GPU_EXPORTER_ARGS="--source nvml"
EOF
  install -D -m 0644 /dev/stdin "$t/usr/lib/sysusers.d/gpu-exporter.conf" <<'EOF'
# The user gpu-exporter's unit runs as (systemd-sysusers).
u gpu-exporter - "gpu-exporter" / /usr/sbin/nologin
EOF
  install -d -m 0700 "$t/etc/gpu-exporter"
  install -m 0644 "$root/README.md" "$t/usr/share/doc/gpu-exporter/"
  install -m 0644 "$root"/docs/runbooks/*.md "$t/usr/share/doc/gpu-exporter/runbooks/"
}

# --- the .deb ---------------------------------------------------------------
d="$work/deb"
tree "$d" /etc/default/gpu-exporter
cat >"$d/usr/share/doc/gpu-exporter/copyright" <<'EOF'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: gpu-exporter

Files: *
Copyright: 2026 the gpu-exporter authors
License: Apache-2.0
 On Debian systems, the full text of the Apache License, Version 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF
printf 'gpu-exporter (%s) unstable; urgency=medium\n\n  * Release %s (CHANGELOG.md).\n\n -- gpu-exporter maintainers <gpu-exporter@localhost>  %s\n' \
  "$pkgver" "$version" "$(date -u -R -d "@$epoch")" | gzip -9n >"$d/usr/share/doc/gpu-exporter/changelog.gz"
gzip -9n "$d/usr/share/doc/gpu-exporter/README.md"
install -d -m 0755 "$d/DEBIAN" "$d/usr/share/lintian/overrides"
cat >"$d/DEBIAN/control" <<EOF
Package: gpu-exporter
Version: $pkgver
Architecture: $arch
Maintainer: gpu-exporter maintainers <gpu-exporter@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$d" | cut -f1)
Depends: libc6 (>= 2.34), systemd
Section: utils
Priority: optional
Description: Prometheus exporter for NVIDIA GPU fleets
 Serves NVIDIA GPUs' health, utilisation, memory, Xid errors and alerts to
 Prometheus from NVML, loaded from the driver at run time, with its own
 systemd unit under a sandbox and a dedicated system user.
EOF
echo /etc/default/gpu-exporter >"$d/DEBIAN/conffiles"
# The scripts honour DPKG_ROOT (dpkg --root --force-script-chrootless, as
# the package test installs it): the user goes into that root's files.
cat >"$d/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  systemd-sysusers ${DPKG_ROOT:+--root="$DPKG_ROOT"} gpu-exporter.conf
fi
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
fi
EOF
# The user stays on purge, as Debian keeps system users: files it owned
# elsewhere would otherwise pass to the next user given its uid.
cat >"$d/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
  rm -rf "${DPKG_ROOT:-}/etc/gpu-exporter"
fi
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl --system daemon-reload >/dev/null || true
fi
EOF
cat >"$d/DEBIAN/prerm" <<'EOF'
#!/bin/sh
set -e
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ] && [ "$1" = remove ] &&
  command -v deb-systemd-invoke >/dev/null; then
  deb-systemd-invoke stop gpu-exporter.service gpu-exporter.socket >/dev/null || true
fi
EOF
chmod 0755 "$d/DEBIAN/postinst" "$d/DEBIAN/postrm" "$d/DEBIAN/prerm"
# Each override says why the tag does not apply here.
cat >"$d/usr/share/lintian/overrides/gpu-exporter" <<'EOF'
# The project has no mail address yet; the field must name one.
gpu-exporter: bogus-mail-host Maintainer gpu-exporter@localhost
gpu-exporter: bogus-mail-host-in-debian-changelog gpu-exporter@localhost *
# It holds the web config's private key and basic auth hashes.
gpu-exporter: non-standard-dir-perm 0700 != 0755 [etc/gpu-exporter/]
# No man page: --help and docs/flags.md are the reference.
gpu-exporter: no-manual-page [usr/bin/gpu-exporter]
EOF
(cd "$d" && find usr -type f -exec md5sum {} + | LC_ALL=C sort -k2 >DEBIAN/md5sums)
find "$d" -exec touch -h -d "@$epoch" {} +
deb="$dest/gpu-exporter_${pkgver}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$d" "$deb" >/dev/null

# --- the .rpm ---------------------------------------------------------------
r="$work/rpm"
tree "$r/root" /etc/sysconfig/gpu-exporter
install -D -m 0644 "$root/LICENSE" "$r/root/usr/share/licenses/gpu-exporter/LICENSE"
cat >"$r/gpu-exporter.spec" <<EOF
Name: gpu-exporter
Version: $pkgver
Release: 1
Summary: Prometheus exporter for NVIDIA GPU fleets
License: Apache-2.0
Group: System Environment/Daemons
Packager: gpu-exporter maintainers <gpu-exporter@localhost>
Requires(pre): systemd

%description
Serves NVIDIA GPUs' health, utilisation, memory, Xid errors and alerts to
Prometheus from NVML, loaded from the driver at run time, with its own
systemd unit under a sandbox and a dedicated system user.

%install
cp -a $r/root/. %{buildroot}/

%pre
systemd-sysusers --replace=/usr/lib/sysusers.d/gpu-exporter.conf - <<'SYSUSERS'
u gpu-exporter - "gpu-exporter" / /usr/sbin/nologin
SYSUSERS

%post
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || :; fi

%preun
if [ \$1 -eq 0 ] && [ -d /run/systemd/system ]; then
  systemctl stop gpu-exporter.service gpu-exporter.socket >/dev/null 2>&1 || :
fi

%postun
if [ -d /run/systemd/system ]; then systemctl daemon-reload >/dev/null 2>&1 || :; fi

%files
%attr(0755,root,root) /usr/bin/gpu-exporter
/usr/lib/systemd/system/gpu-exporter.service
/usr/lib/systemd/system/gpu-exporter.socket
/usr/lib/sysusers.d/gpu-exporter.conf
%config(noreplace) /etc/sysconfig/gpu-exporter
%dir %attr(0700,root,root) /etc/gpu-exporter
%doc /usr/share/doc/gpu-exporter
%license /usr/share/licenses/gpu-exporter/LICENSE

%changelog
* $(date -u -d "@$epoch" '+%a %b %d %Y') gpu-exporter maintainers <gpu-exporter@localhost> - $pkgver-1
- Release $version (CHANGELOG.md).
EOF
SOURCE_DATE_EPOCH="$epoch" rpmbuild -bb --quiet --target "$rpmarch-linux" \
  --define "_topdir $r/top" --define "_rpmdir $r/out" \
  --define '__os_install_post %{nil}' --define 'debug_package %{nil}' \
  --define "use_source_date_epoch_as_buildtime 1" --define "clamp_mtime_to_source_date_epoch 1" \
  "$r/gpu-exporter.spec" >/dev/null 2>"$r/log" || { cat "$r/log" >&2; exit 1; }
rpm="gpu-exporter-$pkgver-1.$rpmarch.rpm"
mv "$r/out/$rpmarch/$rpm" "$dest/$rpm"
echo "$deb"
echo "$dest/$rpm"
