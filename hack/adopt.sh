#!/usr/bin/env bash
# Adds groundskeeper to another Go module as a user would, and reports what
# moved: the check behind "adding the SDK moves none of your Kubernetes
# libraries" (README, "Supported versions").
#
# Usage: hack/adopt.sh DIR [REV]
#
# DIR is a clone of the other module; it is modified (go.mod, go.sum and a new
# package), so give it a throwaway copy. REV is the groundskeeper revision to
# add (default HEAD); it is exported with git archive, so only committed
# files count, and a replace directive to the export stands in for go get.
#
# The new package, groundskeeperadoption, imports every public package of the
# library. The script prints the go line and every k8s.io, controller-runtime
# and etcd module of `go list -m all` before and after `go mod tidy`, then
# every other module of the graph whose version moved (patch, minor or
# major, with the count of each: what an adopter's go.sum review sees), the
# modules added, and the packages of DIR that compile before and not after.
# It fails when one of the k8s.io, controller-runtime or etcd minors or the
# go line moves, or when a package stops compiling; the other moves are
# reported for the release notes (RELEASING.md, "Raising a dependency's
# minimum").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(cd "${1:?usage: hack/adopt.sh DIR [REV]}" && pwd)
rev=${2:-HEAD}
export GOWORK=off GOFLAGS=-mod=mod

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$rev" | tar -x -C "$work"
rm -rf "$work/examples" "$work/internal/tools" # modules of their own

# The public packages of the library, the way a user sees them.
mapfile -t pkgs < <(cd "$work" && go list ./... | grep -v '/internal/\|/internal$')

versions() {
  go mod edit -json | sed -n 's/^\t"Go": "\(.*\)",$/go \1/p'
  go list -m -f '{{.Path}} {{.Version}}' all |
    grep -E '^(k8s\.io/|sigs\.k8s\.io/controller-runtime |go\.etcd\.io/etcd/)' || true
}
# compiled lists the packages of the module that compile (go list -export
# compiles each package; a package that does not has no export data).
compiled() {
  go list -e -export -f '{{if and (not .Error) .Export}}{{.ImportPath}}{{end}}' ./... 2>/dev/null | sed '/^$/d' | sort
}
# modules lists every module of the graph but the main one, with its version.
modules() { go list -m -f '{{if not .Main}}{{.Path}} {{.Version}}{{end}}' all | sed '/^$/d' | sort; }
# minors reduces "path vX.Y.Z" lines to "path vX.Y".
minors() { sed -E 's/^([^ ]+) (v[0-9]+\.[0-9]+)\..*$/\1 \2/; s/^go ([0-9]+\.[0-9]+).*$/go \1/'; }

cd "$dir"
versions >"$work/before.versions"
modules >"$work/before.modules"
compiled >"$work/before.compiled"

go mod edit -require=github.com/groundskeeper-io/groundskeeper@v0.0.0-00010101000000-000000000000 \
  -replace=github.com/groundskeeper-io/groundskeeper="$work"
mkdir -p groundskeeperadoption
{
  echo '// Package groundskeeperadoption imports every public package of groundskeeper.'
  echo 'package groundskeeperadoption'
  echo
  echo 'import ('
  for p in "${pkgs[@]}"; do echo "	_ \"$p\""; done
  echo ')'
} >groundskeeperadoption/adopt.go
go mod tidy
versions >"$work/after.versions"
modules >"$work/after.modules"
compiled >"$work/after.compiled"

echo "== versions before (go line, k8s.io, controller-runtime, etcd)"
cat "$work/before.versions"
echo "== changes after"
diff <(cat "$work/before.versions") <(cat "$work/after.versions") && echo "(none moved)" || true
# Every module present before whose version is not the same after, by how
# far it moved (the first differing element of vMAJOR.MINOR.PATCH).
echo "== every module of the graph that moved"
join <(sort "$work/before.modules") <(sort "$work/after.modules") | awk '
  $2 != $3 {
    split(substr($2, 2), a, /[.-]/); split(substr($3, 2), b, /[.-]/)
    kind = (a[1] != b[1]) ? "major" : (a[2] != b[2]) ? "minor" : "patch"
    n[kind]++; print "  " kind ": " $1 " " $2 " -> " $3
  }
  END { printf "  (%d major, %d minor, %d patch)\n", n["major"], n["minor"], n["patch"] }'
new_modules=$(join -v2 <(sort "$work/before.modules") <(sort "$work/after.modules") | grep -v '^github.com/groundskeeper-io/groundskeeper ' || true)
echo "== modules added to the graph: $(printf '%s' "$new_modules" | grep -c . || true)"
[ -z "$new_modules" ] || echo "$new_modules" | sed 's/^/  /'
echo "== packages compiled: $(wc -l <"$work/before.compiled") before, $(wc -l <"$work/after.compiled") after (the new one included)"
lost=$(comm -23 "$work/before.compiled" "$work/after.compiled")
# moved: a module present before whose minor is not the same after.
moved=$(join <(minors <"$work/before.versions" | sort) <(minors <"$work/after.versions" | sort) | awk '$2 != $3 {print $1": "$2" -> "$3}')
added=$(join -v2 <(minors <"$work/before.versions" | sort) <(minors <"$work/after.versions" | sort))
adopted=$(grep -qx "$(go list -m)/groundskeeperadoption" "$work/after.compiled" && echo yes || echo no)
fail=0
if [ -n "$added" ]; then echo "== added (not in the module graph before):"; echo "$added"; fi
if [ -n "$lost" ]; then echo "FAIL: no longer compile:"; echo "$lost"; fail=1; fi
if [ -n "$moved" ]; then echo "FAIL: a go line or a k8s.io, controller-runtime or etcd minor moved:"; echo "$moved"; fail=1; fi
if [ "$adopted" != yes ]; then echo "FAIL: the package importing groundskeeper does not compile:"; go build ./groundskeeperadoption || true; fail=1; fi
[ $fail = 0 ] && echo "OK: groundskeeper ($rev) adopted by $(go list -m), nothing moved"
exit $fail
