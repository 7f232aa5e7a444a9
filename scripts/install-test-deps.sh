#!/usr/bin/env bash
# install-test-deps.sh installs, from Debian's packages, the server binaries
# that internal/testserver starts for golocker's tests. It is idempotent: it
# checks each requirement first and runs apt-get (update, then install) only
# for what is missing. It never starts the installed services.
#
# Usage: scripts/install-test-deps.sh [--check]
#   --check   only report what is missing; exit 1 if anything is.
#
# To add a requirement, add one line to REQUIREMENTS below and, if no
# existing check fits, a check_<name> function.
set -euo pipefail

# Directories searched besides PATH (Debian keeps PostgreSQL's tools outside
# PATH; some images link them into /usr/local/bin).
EXTRA_DIRS=(/usr/local/bin /usr/sbin /usr/lib/postgresql/*/bin)

# REQUIREMENTS: "description|check|debian package" per line. A check is a
# shell command that succeeds when the requirement is met.
REQUIREMENTS=(
	"redis-server and redis-cli|have redis-server && have redis-cli|redis-server"
	"MariaDB server (mariadbd, mariadb-install-db)|have mariadbd && have mariadb-install-db|mariadb-server"
	"PostgreSQL server (postgres, initdb, pg_ctl)|have postgres && have initdb && have pg_ctl|postgresql"
	"Java runtime for ZooKeeper|have java|default-jre-headless"
	"ZooKeeper jars|check_zookeeper_jars|zookeeper"
	# etcd is built from this module (etcd's embed package); Debian's
	# etcd-server is not needed.
	# --- SQL / MongoDB requirements (added by their owners) go below. ---
	# MariaDB and PostgreSQL are the two lines above. SQLite needs nothing
	# (pure-Go driver). MongoDB: Debian has no mongod; internal/testserver
	# builds FerretDB from internal/testserver/ferretdb with the go command
	# on first use (about a minute) and caches it, so nothing to install.
	# The admin page's browser test (cmd/lockctl/e2e_test.go) drives
	# Debian's Chromium with playwright-core, which it installs itself with
	# npm ci; it needs node >= 20 and npm, which Debian 12's nodejs is not.
	"Chromium for the admin page's browser test|[[ -x /usr/bin/chromium ]]|chromium"
)

have() {
	command -v "$1" >/dev/null 2>&1 && return 0
	local d
	for d in "${EXTRA_DIRS[@]}"; do
		[[ -x "$d/$1" ]] && return 0
	done
	return 1
}

check_zookeeper_jars() {
	[[ -f /usr/share/java/zookeeper.jar || -n "$(compgen -G '/usr/share/zookeeper/lib/zookeeper-*.jar' || true)" ]]
}

check_only=false
case "${1:-}" in
--check) check_only=true ;;
"") ;;
*)
	echo "usage: $0 [--check]" >&2
	exit 2
	;;
esac

missing_pkgs=()
for req in "${REQUIREMENTS[@]}"; do
	IFS='|' read -r desc check pkg <<<"$req"
	if eval "$check"; then
		echo "ok:      $desc"
	else
		echo "missing: $desc (Debian package $pkg)"
		missing_pkgs+=("$pkg")
	fi
done

if [[ ${#missing_pkgs[@]} -eq 0 ]]; then
	echo "All test dependencies are installed."
	exit 0
fi
if $check_only; then
	echo "Missing packages: ${missing_pkgs[*]}" >&2
	exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "error: packages missing (${missing_pkgs[*]}) and not running as root." >&2
	echo "Run: sudo $0   (or: sudo apt-get install ${missing_pkgs[*]})" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "error: apt-get not found; install the equivalent of: ${missing_pkgs[*]}" >&2
	exit 1
fi

# Keep package scripts from starting the services: tests start their own
# servers on free ports. Restore whatever policy-rc.d was there before.
policy=/usr/sbin/policy-rc.d
policy_backup=""
if [[ -e $policy ]]; then
	policy_backup=$(mktemp)
	cp -p "$policy" "$policy_backup"
fi
restore_policy() {
	if [[ -n $policy_backup ]]; then
		mv -f "$policy_backup" "$policy"
	else
		rm -f "$policy"
	fi
}
trap restore_policy EXIT
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod 755 "$policy"

export DEBIAN_FRONTEND=noninteractive
# Remove duplicates while keeping order.
mapfile -t pkgs < <(printf '%s\n' "${missing_pkgs[@]}" | awk '!seen[$0]++')
echo "Installing: ${pkgs[*]}"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${pkgs[@]}"

failed=false
for req in "${REQUIREMENTS[@]}"; do
	IFS='|' read -r desc check pkg <<<"$req"
	if ! eval "$check"; then
		echo "error: still missing after install: $desc (package $pkg)" >&2
		failed=true
	fi
done
$failed && exit 1
echo "All test dependencies are installed."
