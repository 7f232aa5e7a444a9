#!/usr/bin/env bash
# failures.sh LOG: print, from the output of go test in LOG, each failing
# test's report (its "--- FAIL" line and the indented lines under it), each
# panic with the lines after it, and the FAIL lines of packages, capped so
# that the summary fits at the end of a CI log.
set -euo pipefail
log=${1:?usage: failures.sh LOG}
awk '
	/^[[:space:]]*--- FAIL/ { infail = 1; print; n++; next }
	infail && /^[[:space:]]{4,}/ { if (lines++ < 60) print; next }
	{ infail = 0; lines = 0 }
	/^panic: |^fatal error: |^WARNING: DATA RACE/ { inpanic = 40 }
	inpanic > 0 { print; inpanic--; next }
	/^FAIL|^--- FAIL|^ok .*\(cached\)$/ { if ($0 ~ /^FAIL/) print }
' "$log" | head -400
