// Package lockadmin is an admin page for golocker: an http.Handler that
// lists a Client's holds live, releases one by force after a confirmation
// that asks for a reason, and charts lock activity.
//
// Mount it under a prefix in a service; its links are relative:
//
//	rec := lockadmin.NewRecorder() // optional: live charts
//	c, err := locker.Open(ctx, url, locker.WithObserver(rec))
//	...
//	h, err := lockadmin.New(c,
//		lockadmin.WithBasicAuth("ops", os.Getenv("LOCKS_ADMIN_PASSWORD")),
//		lockadmin.WithAuditLog(slog.Default()),
//		lockadmin.WithRecorder(rec))
//	...
//	mux.Handle("/locks/", http.StripPrefix("/locks", h))
//
// or serve it alone with ListenAndServe, as `lockctl serve` does.
//
// The page is HTML, CSS and plain JavaScript embedded in the package: no
// CDN, no web font, no build step, so it works on a closed network. It
// polls two JSON endpoints every two seconds: api/holds (the holds, by
// name prefix and substring, with their owners' host and process, fencing
// tokens, remaining leases and, where the driver counts them, waiters) and
// api/stats (the Recorder's statistics). A release is a POST to
// api/release.
//
// # Security
//
//   - Authentication: a bearer token (WithBearerToken; a browser types it
//     once in a login form and gets a session cookie), HTTP basic auth
//     (WithBasicAuth), or the service's own (WithAuthenticator). Secrets
//     are compared in constant time.
//   - Without authentication the handler serves only loopback clients
//     that name a loopback host (so a DNS-rebinding page is refused) and
//     come through no proxy; ListenAndServe and Serve refuse a non-loopback
//     address (ErrNoAuth). Behind a reverse proxy on the same host,
//     configure authentication.
//   - The CSRF token and the login cookie's key derive from a random secret
//     of each handler; replicas behind a load balancer share one with
//     WithSecret, so that each accepts the others' pages and logins.
//   - Releases are protected against cross-site requests: the browser's
//     Sec-Fetch-Site or Origin must be the page's own
//     (http.CrossOriginProtection), the request must carry the page's
//     random token in the X-CSRF-Token header, and its body must be JSON.
//     Otherwise the answer is 403.
//   - WithReadOnly hides the release buttons and refuses releases (403).
//   - Every release and every refused attempt is recorded in the audit
//     log (WithAuditLog): who asked, from where, the lock, its holder's
//     owner and token at the time, the reason and the outcome.
//   - The page sets Content-Security-Policy (default-src 'self',
//     frame-ancestors 'none'), X-Content-Type-Options: nosniff and
//     Referrer-Policy: no-referrer. A backend URL shown on the page
//     (WithBackendURL) has its password redacted.
//
// A release first checks that the lock's holder is still the one the
// operator saw (owner and token), and refuses with 409 Conflict if it
// changed hands; backend.Inspector's ForceRelease takes no owner, so a
// change in the one store round trip between the check and the release
// cannot be detected. The confirmation says when the holder learns of the
// release: at once where the driver declares LostSignal (etcd, ZooKeeper,
// Redis whose servers publish keyspace events); otherwise at its next
// renewal, up to a third of its lease later, while the next owner may
// already hold the lock.
//
// # Charts
//
// A Recorder is a locker.Observer that keeps per-second statistics for
// the last five minutes in fixed memory: acquisitions by outcome, wait
// percentiles, holds lost by reason, renewals, active holds and waiters.
// Without one the page says how to add it. For metrics that outlive the
// process, use package otellocker.
package lockadmin
