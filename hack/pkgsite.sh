#!/usr/bin/env bash
# Shows the library's documentation as pkg.go.dev will: pkgsite (pinned in
# hack/testenv.sh) over this checkout's root module alone (GOWORK=off, so the
# library at the versions its go.mod requires; the examples module is not
# published documentation), on a loopback port.
#
# Usage:
#   hack/pkgsite.sh                serve on 127.0.0.1:${PKGSITE_PORT:-8080} until interrupted
#   hack/pkgsite.sh check          check every public package's page, then stop (make docs)
#   hack/pkgsite.sh shots [DIR]    check, then screenshot each package's page with
#                                  headless Chromium (installed from Debian if
#                                  missing) into DIR (default /tmp/pkgsite-shots)
#
# check fails unless, for every package of the root module outside internal/:
# its page answers 200 and is that package's page (not an error page); the
# license is detected as Apache-2.0 and the documentation is shown (pkgsite
# hides it when it finds no license it can redistribute under); the package
# has an Overview, with no code generator's marker (+groupName=...) in it;
# and every Example function in its tests is on the page.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.cache/bin"
mode=${1:-serve}

log() { printf 'pkgsite: %s\n' "$*" >&2; }

"$root/hack/testenv.sh" pkgsite

if [ "$mode" = serve ]; then
  cd "$root"
  log "serving http://127.0.0.1:${PKGSITE_PORT:-8080}/github.com/groundskeeper-io/groundskeeper"
  GOWORK=off exec "$bin/pkgsite" -http "127.0.0.1:${PKGSITE_PORT:-8080}" -list=false .
fi
case $mode in
  check | shots) ;;
  *) log "unknown mode $mode (want serve, check or shots)"; exit 2 ;;
esac

work=$(mktemp -d)
pid=
stop() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap stop EXIT

# start runs pkgsite on a free loopback port and waits until it answers; it
# sets addr. pkgsite loads the module and the standard library first (about
# 5 s).
start() {
  local port i
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 20000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue # taken
    (cd "$root" && GOWORK=off exec "$bin/pkgsite" -http "127.0.0.1:$port" -list=false .) >"$work/pkgsite.log" 2>&1 &
    pid=$!
    for i in $(seq 1 240); do
      if curl -fs -o /dev/null "http://127.0.0.1:$port/"; then
        addr=127.0.0.1:$port
        return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
    grep -q 'address already in use' "$work/pkgsite.log" || break
  done
  log "pkgsite did not start:"
  cat "$work/pkgsite.log" >&2
  return 1
}

# The public packages: every package of the root module but internal ones.
mapfile -t pkgs < <(cd "$root" && GOWORK=off go list -f '{{.ImportPath}} {{.Name}} {{.Dir}}' ./... |
  awk '$1 !~ /(^|\/)internal(\/|$)/')
[ ${#pkgs[@]} -gt 0 ] || { log "go list found no packages"; exit 1; }

start
log "pkgsite on http://$addr over $root"

failed=0
fail() { log "FAIL $1: $2"; failed=$((failed + 1)); }

for line in "${pkgs[@]}"; do
  read -r path name dir <<<"$line"
  before=$failed
  page="$work/page.html"
  # pkgsite loads a module on its first request and answers 500 when that
  # times out on a loaded machine: a page is asked for again, three times
  # at most; a page that fails a third time fails the check.
  for attempt in 1 2 3; do
    code=$(curl -s -o "$page" -w '%{http_code}' "http://$addr/$path") || code=000
    case "$code" in 5* | 000) [ "$attempt" = 3 ] || { log "$path: HTTP $code, asking again"; sleep 2; } ;; *) break ;; esac
  done
  if [ "$code" != 200 ]; then
    fail "$path" "HTTP $code"
    continue
  fi
  # One line, so that elements spanning lines match.
  flat=$(tr '\n' ' ' <"$page")
  if ! grep -qF "<title>$name package - $path - Go Packages</title>" <<<"$flat"; then
    fail "$path" "not the package's page: $(grep -o '<title>[^<]*' <<<"$flat" | head -1)"
    continue
  fi
  # pkgsite links the license type only when it may show the documentation.
  license=$(grep -oE 'data-test-id="UnitHeader-license"[^>]*>[^<]*</a>' <<<"$flat" | sed -E 's/.*>[[:space:]]*([^<]*[^[:space:]<])[[:space:]]*<\/a>$/\1/' || true)
  [ "$license" = Apache-2.0 ] || fail "$path" "license shown as '${license:-none}', want Apache-2.0"
  if grep -qF 'Documentation not displayed due to license restrictions' <<<"$flat"; then
    fail "$path" "documentation hidden because of its license"
  fi
  grep -qF 'id="pkg-overview"' <<<"$flat" || fail "$path" "no Overview (no package comment?)"
  # Code generators' markers (+groupName=..., +kubebuilder:...) belong in a
  # comment block of their own above the doc comment, as in Kubernetes' API
  # types, not in the prose (code blocks, <pre>, may show them).
  marker=$(perl -pe 's/<pre\b.*?<\/pre>//g' <<<"$flat" |
    grep -oE '(^|[[:space:]>])\+(kubebuilder:|groupName=|versionName=|genclient|k8s:|optional\b|required\b|list(Type|MapKey)=)[^[:space:]<]*' | head -1 | sed -E 's/^[[:space:]>]+//' || true)
  [ -z "$marker" ] || fail "$path" "a code generator's marker shows in the documentation: $marker"
  want=$(cat "$dir"/*_test.go 2>/dev/null | grep -c '^func Example' || true)
  got=$( (grep -oE 'id="example-[^"]*"' <<<"$flat" || true) | sort -u | wc -l)
  [ "$got" -eq "$want" ] || fail "$path" "$got examples on the page, $want Example functions in its tests"
  [ "$failed" -gt "$before" ] || log "ok $path ($got examples)"
done

if [ "$failed" -gt 0 ]; then
  log "$failed problems in ${#pkgs[@]} packages"
  exit 1
fi
log "all ${#pkgs[@]} public packages render, with license Apache-2.0 and their examples"

[ "$mode" = shots ] || exit 0

"$root/hack/testenv.sh" chromium
shots=${2:-/tmp/pkgsite-shots}
mkdir -p "$shots"
for line in "${pkgs[@]}"; do
  read -r path name dir <<<"$line"
  rel=${path#github.com/groundskeeper-io/groundskeeper}
  rel=${rel#/}
  rel=${rel:-groundskeeper}
  file="$shots/${rel//\//_}.png"
  # --no-sandbox: Chromium's sandbox refuses to run as root.
  "$bin/chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=1280,2000 --virtual-time-budget=5000 \
    --screenshot="$file" "http://$addr/$path" >/dev/null 2>&1 ||
    fail "$path" "chromium could not take a screenshot"
  log "screenshot $file"
done
[ "$failed" -eq 0 ]
