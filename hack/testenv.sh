#!/usr/bin/env bash
# Builds or installs the real components that testenv starts, and the
# pinned tools of `make lint`, into a cache outside the clone keyed by their
# pinned versions, then links them into .cache/bin of this clone and into
# bin of the cache, where the tests of other modules that use testenv find
# them.
# A component is built only when its pinned version changed, so a fresh clone
# on a machine that built them before costs only the links.
#
# Usage: hack/testenv.sh [component ...]   (default: all but chromium)
set -euo pipefail
# The tools modules under internal/tools are not in the go.work workspace.
export GOWORK=off

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${GROUNDSKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/groundskeeper}
bin="$root/.cache/bin"
mkdir -p "$cache/bin" "$bin"

# One run at a time per cache: two clones building the same component at
# once would write into each other's output.
exec 9>"$cache/.lock"
if ! flock -n 9; then
  printf 'testenv: waiting for another hack/testenv.sh run to finish\n' >&2
  flock 9
fi

# Pinned versions. Kubernetes and etcd are pinned by their tools modules
# (internal/tools/*/go.mod and go.sum); the others here.
kube_version=v1.37.2
minio_version=v0.0.0-20260212201848-7aac2a2c5b7c
fakegcs_version=v1.56.1
azurite_version=3.37.0
staticcheck_version=v0.8.2
pkgsite_version=v0.6.0
# The Go vulnerability database as the golang.org/x/vulndb module holds it
# (its OSV records, data/osv), indexed by the same module's cmd/indexdb into
# the layout govulncheck reads with -db file://. Raise it to check against
# newer reports; the date in the version is the newest report it can know.
vulndb_version=v0.0.0-20261105234957-e22db6528018

log() { printf 'testenv: %s\n' "$*" >&2; }

# quiet runs a command without the module download chatter of the go command.
quiet() { "$@" 2> >(grep -v '^go: downloading' >&2); }

# key prints a short hash of its arguments, with each argument that names a
# file replaced by the file's contents (never its path: every clone must find
# the same cache entries), and of the Go version.
key() {
  { for a in "$@"; do if [ -f "$a" ]; then cat "$a"; else printf '%s\n' "$a"; fi; done; go env GOVERSION; } |
    sha256sum | cut -c1-12
}

# link NAME TARGET links .cache/bin/NAME and the cache's bin/NAME to TARGET.
link() { ln -sfn "$2" "$bin/$1" && ln -sfn "$2" "$cache/bin/$1"; }

build_kube() {
  local mod="$root/internal/tools/kube" k dir
  k=$(key "$mod/go.mod" "$mod/go.sum" "$kube_version")
  dir="$cache/kube-$kube_version-$k"
  if [ ! -x "$dir/kube-apiserver" ] || [ ! -x "$dir/kube-controller-manager" ]; then
    log "building kube-apiserver and kube-controller-manager $kube_version (about 8 minutes cold)"
    local v=k8s.io/component-base/version minor=${kube_version#v1.}
    minor=${minor%%.*}
    (cd "$mod" && GOWORK=off quiet go build -trimpath -o "$dir.tmp/" \
      -ldflags "-s -w -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
      ./cmd/kube-apiserver ./cmd/kube-controller-manager)
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  link kube-apiserver "$dir/kube-apiserver"
  link kube-controller-manager "$dir/kube-controller-manager"
}

build_etcd() {
  local mod="$root/internal/tools/etcd" k dir
  k=$(key "$mod/go.mod" "$mod/go.sum")
  dir="$cache/etcd-$k"
  if [ ! -x "$dir/etcd" ]; then
    log "building etcd"
    (cd "$mod" && GOWORK=off quiet go build -trimpath -ldflags "-s -w" -o "$dir.tmp/" ./cmd/etcd)
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  link etcd "$dir/etcd"
}

# goinstall NAME PACKAGE VERSION installs a pinned Go command.
goinstall() {
  local name=$1 pkg=$2 version=$3 dir
  dir="$cache/$name-$version-$(key "$pkg@$version")"
  if [ ! -x "$dir/$name" ]; then
    log "installing $pkg@$version"
    GOBIN="$dir.tmp" GOFLAGS=-trimpath quiet go install -ldflags "-s -w" "$pkg@$version"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  link "$name" "$dir/$name"
}

build_minio() { goinstall minio github.com/minio/minio "$minio_version"; }
build_fakegcs() { goinstall fake-gcs-server github.com/fsouza/fake-gcs-server "$fakegcs_version"; }
build_staticcheck() { goinstall staticcheck honnef.co/go/tools/cmd/staticcheck "$staticcheck_version"; }
build_pkgsite() { goinstall pkgsite golang.org/x/pkgsite/cmd/pkgsite "$pkgsite_version"; }

# vulndb builds the vulnerability database that make vulncheck reads, and
# links it as .cache/vulndb.
build_vulndb() {
  goinstall indexdb golang.org/x/vulndb/cmd/indexdb "$vulndb_version"
  local dir="$cache/vulndb-$vulndb_version" src
  if [ ! -f "$dir/index/modules.json" ] || [ ! -f "$dir/SOURCE" ]; then
    log "indexing the vulnerability database golang.org/x/vulndb@$vulndb_version"
    src=$(cd "$cache" && GOWORK=off quiet go mod download -json "golang.org/x/vulndb@$vulndb_version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [ -d "$src/data/osv" ] || { log "golang.org/x/vulndb@$vulndb_version has no data/osv"; exit 1; }
    rm -rf "$dir.tmp"
    "$bin/indexdb" -vulns "$src/data/osv" -out "$dir.tmp"
    echo "golang.org/x/vulndb@$vulndb_version" >"$dir.tmp/SOURCE"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  ln -sfn "$dir" "$root/.cache/vulndb"
}

# chromium (Debian's), headless, takes the screenshots of hack/pkgsite.sh
# shots; no test needs it.
build_chromium() {
  command -v chromium >/dev/null || install_debian chromium
  link chromium "$(command -v chromium)"
}

build_azurite() {
  command -v npm >/dev/null || { log "npm is missing"; install_debian nodejs npm; }
  local dir="$cache/azurite-$azurite_version"
  if [ ! -x "$dir/node_modules/.bin/azurite-blob" ]; then
    log "installing azurite@$azurite_version from npm"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    npm install --prefix "$dir.tmp" --no-audit --no-fund --loglevel=error "azurite@$azurite_version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
  fi
  link azurite-blob "$dir/node_modules/.bin/azurite-blob"
}

# rclone (Debian's) is the reference that the backupstore benchmarks compare
# against.
build_rclone() {
  command -v rclone >/dev/null || install_debian rclone
  link rclone "$(command -v rclone)"
}

# install_debian PACKAGE... installs Debian packages that are missing.
install_debian() {
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  log "installing Debian packages: $*"
  $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >&2
}

components=("$@")
[ ${#components[@]} -gt 0 ] || components=(etcd kube minio fakegcs azurite staticcheck pkgsite vulndb rclone)
for c in "${components[@]}"; do
  "build_$c"
done
