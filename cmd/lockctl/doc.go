// Command lockctl runs commands under a distributed lock and inspects locks:
// flock(1) for a fleet.
//
//	lockctl [--url URL] run [--wait D] [--ttl D] [--grace D] NAME -- CMD [ARGS…]
//	lockctl [--url URL] list [--prefix P] [--json]
//	lockctl [--url URL] release --force NAME
//	lockctl [--url URL] bench [--workers N] [--duration D] [--hold D] [--think D]
//	lockctl [--url URL] serve [--addr ADDR] [--read-only] [--token-env VAR] [--basic-auth-env VAR] [--prefix P]
//	lockctl [--url URL] load [--duration D] [--workers N] [--handles N] [--rate R] [--out DIR] SCENARIO
//	lockctl [--url URL] demo
//
// The backend is --url, else $LOCKER_URL, else the embedded default: a SQLite
// file in the user's cache directory, so every subcommand works on a fresh
// machine. lockctl names it on stderr when it creates it (its first use
// without a URL), and when list finds no holds or release finds the lock
// free there — where the locks looked for may be on a backend the user
// forgot to name; serve, bench and demo name their backend anyway. An
// unknown scheme is a usage error that lists the schemes lockctl supports.
// An in-process backend (mem://) is refused: no other process could see
// its locks.
// Passwords in URLs are never printed. `lockctl CMD --help` lists a
// subcommand's flags; `lockctl --version` prints the version.
//
// # run
//
// run holds the lock NAME while CMD runs. The lock is renewed while the
// command runs; the command finds the fencing token in $LOCKER_TOKEN and the
// name in $LOCKER_LOCK_NAME. --wait 0 fails at once if the lock is held;
// --wait D waits at most D; without --wait, run waits until the lock is
// free; a held lock's message names its holder where the backend can say
// (owner, token, time left). Signals sent to lockctl (INT, TERM, HUP, QUIT,
// USR1, USR2) are passed to the command. If the hold is lost while the
// command runs, the command gets SIGTERM at once, then SIGKILL after
// --grace, and lockctl exits with 125, saying when and why; it also exits
// with 125 if the release after the command finds the hold gone. How soon
// a loss is known depends on the backend. etcd and ZooKeeper, and Redis
// whose servers publish keyspace events (notify-keyspace-events Kgx; see
// docs/drivers/redis.md), push it: a hold freed by force (release --force,
// the admin page) or deleted by hand is told within milliseconds, in
// practice before another lockctl run has started its command. Elsewhere
// (SQL, MongoDB, Redis without the setting) the next renewal finds it:
// the hold is checked on the store every second at least (every renewal
// is owner-checked), so the command may still run for up to a second
// while another owner holds the lock.
//
// # release
//
// release --force frees a lock whoever holds it, handing it to the next
// waiter. It says whether the backend tells the holder at once or the
// holder learns it at its next renewal.
//
// # serve
//
// serve serves the admin page of package lockadmin on --addr (default
// 127.0.0.1:8080) until SIGINT or SIGTERM: the holds, live, and a button
// to release one by force, with a reason that goes to the audit log (JSON
// lines on stderr). Credentials come from the environment, never from a
// flag's value: a bearer token from $LOCKER_ADMIN_TOKEN, user:password for
// basic auth from $LOCKER_ADMIN_BASIC_AUTH, or from the variables that
// --token-env and --basic-auth-env name. Without credentials serve refuses
// a non-loopback address (exit 64). docs/operating.md has the details.
//
// # load
//
// load runs a load scenario against the backend: hot-name (one name
// contended by every worker), zipf (many names, a few hot), long-holds
// (long holds renewed at scale), crash-stall (holders killed with SIGKILL
// or frozen with SIGSTOP while they hold a name guarding a fenced
// resource) and http-middleware (an HTTP service behind locker.Middleware
// under an open-loop request rate), or a scenario file of the same JSON
// shape (see scenarios/ in the source). The workers are processes: lockctl
// starts itself once per worker. While it runs, load shows a progress bar;
// at the end it prints a summary and writes, into --out, report.html (one
// self-contained page with charts: throughput, wait percentiles, hand-off
// gap, renewals and lost holds over time), and the raw per-second series
// as series.json and series.csv. On etcd and ZooKeeper, whose session
// rather than the hold's TTL decides when a dead holder's lock is freed,
// load sets the session's TTL to the scenario's unless the URL sets it.
// docs/benchmarks.md shows figures for each backend.
//
// # demo
//
// demo runs golocker's demo — the one `make demo` runs on an embedded
// SQLite file (examples/demo) — on the backend: three worker processes
// take one lock in turn and append to a ledger that refuses a write whose
// fencing token is below one it has accepted; one is frozen with SIGSTOP
// while it holds the lock, for 2.5 leases, and its stale write is refused
// when it wakes up. It ends with a verdict, and exits 1 if the verdict is
// FAIL.
//
// # Exit status
//
//	the command's    when the command ran to its end (128+N if signal N killed it)
//	0                --help, --version, and every subcommand that did its work
//	1                another failure (serve cannot listen, demo's verdict is FAIL, ...)
//	3                release: the lock was not held, nothing was released
//	64               bad usage: unknown flag or backend, bad duration or URL, empty name, no command
//	69               the backend failed or cannot do it (e.g. list on a backend that cannot inspect)
//	75               --wait 0 and the lock is held by another owner
//	124              --wait D ran out before the lock was free
//	125              the hold was lost while the command ran (the command was terminated),
//	                 or was found lost when run released it after the command ended
//	126, 127         the command could not be run, or was not found
//	130, 143         lockctl was interrupted (SIGINT, SIGTERM) while waiting for the lock
package main
