#!/usr/bin/env bash
# Builds or installs the real components that testenv starts, and the
# pinned tools of `make lint`, into a cache outside the clone keyed by their
# pinned versions, then links them into .cache/bin of this clone and into
# bin of the cache, where the tests of other modules that use testenv find
# them.
# A component is built only when its pinned version changed, so a fresh clone
# on a machine that built them before costs only the links.
#
# It says what it builds and, every 30 s, how far along it is (modules
# downloaded, packages compiled); a run that waits for another run's lock
# repeats what that run last said. The last line names what is ready.
#
# Usage: hack/testenv.sh [component ...]   (default: all but chromium)
set -euo pipefail
# The tools modules under internal/tools are not in the go.work workspace.
export GOWORK=off

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${GROUNDSKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/groundskeeper}
bin="$root/.cache/bin"
mkdir -p "$cache/bin" "$bin"

log() { printf 'testenv: %s\n' "$*" >&2; }

# elapsed T0 prints the time since $SECONDS was T0, as 3m07s.
elapsed() { local d=$((SECONDS - $1)); printf '%dm%02ds' $((d / 60)) $((d % 60)); }

# The run that holds the lock says what it is doing in $cache/.status, so
# that a run waiting for it (another clone, another make) shows more than
# that it waits: a cold build takes tens of minutes on 2 cores.
status_file="$cache/.status"
status() {
  log "$*"
  printf 'pid %s, %s: %s\n' "$$" "$(date +%H:%M:%S)" "$*" >"$status_file.$$" && mv -f "$status_file.$$" "$status_file"
}

# One run at a time per cache: two clones building the same component at
# once would write into each other's output.
exec 9>"$cache/.lock"
if ! flock -n 9; then
  waited=$SECONDS
  until flock -w 30 9; do
    log "waiting $(elapsed "$waited") for another hack/testenv.sh run, which says: $(cat "$status_file" 2>/dev/null || echo nothing yet)"
  done
  log "the other run finished after $(elapsed "$waited")"
fi
started=$SECONDS
built=()

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

# heartbeat WHAT T0 CMD... runs CMD and, every 30 s while it runs, says that
# WHAT goes on and for how long.
heartbeat() {
  local what=$1 t0=$2 pid rc=0
  shift 2
  "$@" &
  pid=$!
  while ! wait_for "$pid" 30; do
    status "$what ($(elapsed "$t0"))"
  done
  wait "$pid" || rc=$?
  return $rc
}

# wait_for PID SECONDS reports whether PID exited within SECONDS.
wait_for() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# progress WHAT TOTAL T0 reads the output of go build -v (one package path a
# line) and, every 30 s, says how many of the TOTAL packages were compiled;
# every other line (compiler errors) goes to stderr as it is.
progress() {
  local what=$1 total=$2 t0=$3 n=0 last=$SECONDS line rc
  while true; do
    if IFS= read -r -t 30 line; then
      case $line in
      '' | *' '* | '#'* | *:*) printf '%s\n' "$line" >&2 ;;
      *) n=$((n + 1)) ;;
      esac
    else
      rc=$?
      [ "$rc" -gt 128 ] || break
    fi
    if ((SECONDS - last >= 30)); then
      last=$SECONDS
      status "$what: $n of up to $total packages compiled ($(elapsed "$t0"))"
    fi
  done
  status "$what: $n packages compiled and linked in $(elapsed "$t0")"
}

# gobuild WHAT MODULE OUT LDFLAGS PACKAGE... builds PACKAGEs of the tools
# module MODULE into the folder OUT, saying what it does: first the module
# downloads (the slow part of a cold build with a fast compiler cache), then
# the packages compiled out of those the build needs.
gobuild() {
  local what=$1 mod=$2 out=$3 ldflags=$4 t0=$SECONDS total
  shift 4
  status "$what: downloading the modules it needs"
  heartbeat "$what: still downloading modules" "$t0" \
    bash -c 'cd "$1" && shift && go list -deps "$@" >"$0" 2> >(grep -v "^go: downloading" >&2)' "$out.deps" "$mod" "$@"
  total=$(wc -l <"$out.deps")
  rm -f "$out.deps"
  status "$what: compiling (the build needs $total packages; a cold compile takes minutes)"
  if ! (cd "$mod" && go build -v -trimpath -ldflags "$ldflags" -o "$out/" "$@" 2>&1) | progress "$what" "$total" "$t0"; then
    status "$what: build failed after $(elapsed "$t0")"
    return 1
  fi
}

# build_kube builds the control plane's binaries from the kube tools module
# (k8s.io/kubernetes): kube-apiserver, kube-controller-manager and
# kube-scheduler. Only the binaries missing from the cache entry of the
# module's pinned versions are built.
build_kube() {
  local mod="$root/internal/tools/kube" k dir b missing=()
  k=$(key "$mod/go.mod" "$mod/go.sum" "$kube_version")
  dir="$cache/kube-$kube_version-$k"
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    [ -x "$dir/$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    local v=k8s.io/component-base/version minor=${kube_version#v1.} pkgs=()
    minor=${minor%%.*}
    for b in "${missing[@]}"; do pkgs+=("./cmd/$b"); done
    rm -rf "$dir.tmp"
    gobuild "building ${missing[*]} $kube_version" "$mod" "$dir.tmp" \
      "-s -w -X $v.gitVersion=$kube_version -X $v.gitMajor=1 -X $v.gitMinor=$minor -X $v.gitTreeState=clean" \
      "${pkgs[@]}"
    mkdir -p "$dir"
    for b in "${missing[@]}"; do mv "$dir.tmp/$b" "$dir/$b"; done
    rm -rf "$dir.tmp"
    built+=("${missing[@]}")
  fi
  link kube-apiserver "$dir/kube-apiserver"
  link kube-controller-manager "$dir/kube-controller-manager"
  link kube-scheduler "$dir/kube-scheduler"
}

build_etcd() {
  local mod="$root/internal/tools/etcd" k dir
  k=$(key "$mod/go.mod" "$mod/go.sum")
  dir="$cache/etcd-$k"
  if [ ! -x "$dir/etcd" ]; then
    rm -rf "$dir.tmp"
    gobuild "building etcd" "$mod" "$dir.tmp" "-s -w" ./cmd/etcd
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    built+=(etcd)
  fi
  link etcd "$dir/etcd"
}

# build_kwok builds KWOK (sigs.k8s.io/kwok), which plays the kubelet of
# testenv's fake nodes, from its own tools module: it requires other k8s.io
# versions than the kube module.
build_kwok() {
  local mod="$root/internal/tools/kwok" k dir
  k=$(key "$mod/go.mod" "$mod/go.sum")
  dir="$cache/kwok-$k"
  if [ ! -x "$dir/kwok" ]; then
    rm -rf "$dir.tmp"
    gobuild "building kwok" "$mod" "$dir.tmp" "-s -w" sigs.k8s.io/kwok/cmd/kwok
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    built+=(kwok)
  fi
  link kwok "$dir/kwok"
}

# goinstall NAME PACKAGE VERSION installs a pinned Go command.
goinstall() {
  local name=$1 pkg=$2 version=$3 dir
  dir="$cache/$name-$version-$(key "$pkg@$version")"
  if [ ! -x "$dir/$name" ]; then
    local t0=$SECONDS
    status "installing $pkg@$version"
    GOBIN="$dir.tmp" GOFLAGS=-trimpath heartbeat "still installing $pkg@$version" "$t0" \
      quiet go install -ldflags "-s -w" "$pkg@$version"
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    status "installed $name in $(elapsed "$t0")"
    built+=("$name")
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
    status "indexing the vulnerability database golang.org/x/vulndb@$vulndb_version"
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
    local t0=$SECONDS
    status "installing azurite@$azurite_version from npm"
    rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
    heartbeat "still installing azurite@$azurite_version" "$t0" \
      npm install --prefix "$dir.tmp" --no-audit --no-fund --loglevel=error "azurite@$azurite_version" >&2
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    built+=(azurite)
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
[ ${#components[@]} -gt 0 ] || components=(etcd kube kwok minio fakegcs azurite staticcheck pkgsite vulndb rclone)
for c in "${components[@]}"; do
  "build_$c"
done
# The last line says what is ready, and where.
ready=$(cd "$bin" && ls | tr '\n' ' ')
if [ ${#built[@]} -gt 0 ]; then
  status "ready in $bin after $(elapsed "$started") (built ${built[*]}): ${ready% }"
else
  status "ready in $bin (all cached): ${ready% }"
fi
