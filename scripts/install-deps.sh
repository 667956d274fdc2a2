#!/usr/bin/env bash
# Installs the Debian packages the tests and benchmarks use, when they are missing.
# Each part of wattio lists what it needs in PACKAGES below; keep the list sorted. The real-guest
# test of `--source host` (crates/cli/tests/vm_e2e.rs) boots Debian's kernel (linux-image-amd64)
# under qemu-system-x86 with busybox-static in an initramfs that cpio packs.
set -euo pipefail
PACKAGES=(
  apache2-bin
  apache2-utils
  aria2
  busybox-static
  ca-certificates
  caddy
  chromium
  clang
  cpio
  curl
  iproute2
  iputils-ping
  libelf-dev
  lintian
  lighttpd
  linux-image-amd64
  make
  maven
  nghttp2-client
  nginx
  openjdk-17-jdk-headless
  pkg-config
  podman
  prometheus
  python3
  python3-prometheus-client
  python3-venv
  qemu-system-x86
  rclone
  strace
  stress-ng
  time
  util-linux
  wget
  wget2
  xxhash
  zlib1g-dev
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages: ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# cargo-machete: `make test` fails on a dependency a manifest declares and no code uses.
MACHETE_VERSION=0.9.2
if ! cargo machete --version 2>/dev/null | grep -q "$MACHETE_VERSION"; then
  echo "install-deps: installing cargo-machete $MACHETE_VERSION (about 2 minutes on 2 vCPUs)"
  cargo install --quiet --locked --version "$MACHETE_VERSION" cargo-machete
fi

# cargo-deb: `make deb` builds the Debian package that `make test-deploy` checks with lintian.
CARGO_DEB_VERSION=3.8.0
if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
  echo "install-deps: installing cargo-deb $CARGO_DEB_VERSION (about a minute on 2 vCPUs)"
  cargo install --quiet --locked --version "$CARGO_DEB_VERSION" cargo-deb
fi

# helm: `make test-deploy` renders the chart (deploy/helm/wattio) to validate what it makes.
# Built from the Go module proxy with the machine's Go (about 3 minutes on 2 vCPUs).
HELM_VERSION=v4.3.2
HELM="$(go env GOPATH)/bin/helm"
if ! "$HELM" version --short 2>/dev/null | grep -q "^v4.3"; then
  echo "install-deps: building helm $HELM_VERSION (about 3 minutes on 2 vCPUs)"
  go install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi

# sushy-tools: `sushy-static`, OpenStack's Redfish mockup server, which the Redfish platform
# meter's tests (crates/cli/tests/redfish.rs) read a BMC from. In a venv beside the build.
SUSHY_VERSION=2.2.0
TARGET="${CARGO_TARGET_DIR:-target}"
SUSHY_VENV="$TARGET/redfish-venv"
if ! "$SUSHY_VENV/bin/pip" show sushy-tools 2>/dev/null | grep -q "^Version: $SUSHY_VERSION$"; then
  echo "install-deps: installing sushy-tools $SUSHY_VERSION into $SUSHY_VENV"
  python3 -m venv "$SUSHY_VENV"
  "$SUSHY_VENV/bin/pip" install -q "sushy-tools==$SUSHY_VERSION"
fi
