#!/usr/bin/env bash
# Runs a command beside another, for make test: the slow checks beside the
# tests, which spend most of their time waiting on components, so that the
# checks take the CPU the tests leave idle.
#
# Usage:
#   hack/beside.sh 'BACKGROUND COMMAND' FOREGROUND COMMAND...
#
# The background command runs under nice, its output kept in a temporary
# file and printed whole after the foreground command ends (the two never
# interleave). The script fails when either fails, saying which. An
# interrupt at the terminal stops both.
set -uo pipefail

if [ $# -lt 2 ]; then
	echo "usage: hack/beside.sh 'BACKGROUND COMMAND' FOREGROUND COMMAND..." >&2
	exit 2
fi
background=$1
shift

log=$(mktemp "${TMPDIR:-/tmp}/beside.XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM -- "-$pid" 2>/dev/null
	fi
	rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "beside.sh: running beside what follows, its output printed after it: $background"
# A session of its own, so that cleanup stops all of it (make and what
# make runs).
setsid nice -n 10 bash -c "$background" >"$log" 2>&1 &
pid=$!

# In the foreground: an interrupt at the terminal reaches it (make's
# process group), and the trap then stops the background command.
"$@"
rc=$?

start=$(date +%s)
if kill -0 "$pid" 2>/dev/null; then
	echo "beside.sh: waiting for: $background"
fi
wait "$pid"
brc=$?
pid=
echo "beside.sh: output of: $background (done $(( $(date +%s) - start )) s after the rest)"
cat "$log"

if [ $brc -ne 0 ]; then
	echo "beside.sh: FAILED (exit $brc): $background" >&2
fi
if [ $rc -ne 0 ]; then
	echo "beside.sh: FAILED (exit $rc): $*" >&2
	exit $rc
fi
exit $brc
