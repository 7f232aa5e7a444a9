#!/usr/bin/env bash
# Checks that the Makefile's module lists agree with the tree and go.work:
#
#	bash scripts/modules.sh MODULE... -- HELPER_MODULE...
#
# MODULEs (the workspace's) must be exactly the directories go.work uses,
# HELPER_MODULEs must not be in go.work, and together they must be every
# directory of the tree that holds a go.mod. A module added without being
# listed would otherwise be skipped by make test and make lint in silence.
set -euo pipefail
cd "$(dirname "$0")/.."

modules=() helpers=() seen_sep=
for a in "$@"; do
	if [ "$a" = -- ]; then seen_sep=1; continue; fi
	if [ -n "$seen_sep" ]; then helpers+=("$a"); else modules+=("$a"); fi
done

norm() { sed -e 's#^\./##' -e 's#/$##' -e 's#^$#.#' | sort; }

listed_ws=$(printf '%s\n' "${modules[@]}" | norm)
listed_all=$(printf '%s\n' "${modules[@]}" "${helpers[@]}" | norm)
work=$(GOWORK= go work edit -json | sed -n 's/.*"DiskPath": "\(.*\)".*/\1/p' | norm)
tree=$(find . -name go.mod -not -path './.git/*' -printf '%h\n' | norm)

status=0
if [ "$listed_ws" != "$work" ]; then
	echo "modules: the Makefile's MODULES and go.work's use differ:"
	diff <(echo "$listed_ws") <(echo "$work") | sed 's/^/  /' || true
	status=1
fi
if [ "$listed_all" != "$tree" ]; then
	echo "modules: MODULES + HELPER_MODULES and the go.mod files in the tree differ:"
	diff <(echo "$listed_all") <(echo "$tree") | sed 's/^/  /' || true
	status=1
fi
exit $status
