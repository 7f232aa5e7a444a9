// Command lockctl runs commands under a distributed lock and inspects locks:
// flock(1) for a fleet.
//
//	lockctl [--url URL] run [--wait D] [--ttl D] [--grace D] NAME -- CMD [ARGS…]
//	lockctl [--url URL] list [--prefix P] [--json]
//	lockctl [--url URL] release --force NAME
//	lockctl [--url URL] bench [--workers N] [--duration D] [--hold D] [--think D]
//	lockctl [--url URL] demo
//
// The backend is --url, else $LOCKER_URL, else the embedded default: a SQLite
// file in the user's cache directory, so every subcommand works on a fresh
// machine. Passwords in URLs are never printed.
//
// # run
//
// run holds the lock NAME while CMD runs. The lock is renewed while the
// command runs; the command finds the fencing token in $LOCKER_TOKEN and the
// name in $LOCKER_LOCK_NAME. --wait 0 fails at once if the lock is held;
// --wait D waits at most D; without --wait, run waits until the lock is
// free. Signals sent to lockctl (INT, TERM, HUP, QUIT, USR1, USR2) are passed
// to the command. If the hold is lost while the command runs, the command
// gets SIGTERM, then SIGKILL after --grace, and lockctl exits with 125.
//
// # Exit status
//
//	the command's    when the command ran to its end (128+N if signal N killed it)
//	64               bad usage: unknown flag, bad duration, empty name, no command
//	69               the backend failed or cannot do it (e.g. list on a backend that cannot inspect)
//	75               --wait 0 and the lock is held by another owner
//	124              --wait D ran out before the lock was free
//	125              the hold was lost while the command ran; the command was terminated
//	126, 127         the command could not be run, or was not found
//	130, 143         lockctl was interrupted (SIGINT, SIGTERM) while waiting for the lock
package main
