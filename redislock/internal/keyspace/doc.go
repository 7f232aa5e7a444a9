// Package keyspace watches the keys of a redislock Driver's holds through
// Redis's keyspace notifications, and tells a hold when Redis no longer
// has it (Capabilities.LostSignal).
//
// Redis tells a client that a key changed only through keyspace
// notifications, which a server publishes when its notify-keyspace-events
// setting asks for them: a Driver watches only when the servers publish
// them (WithKeyspaceEvents; Open asks).
//
// A Driver that watches subscribes to the keyspace channel of each key it
// holds, __keyspace@<db>__:<key>, on the master that has the key: unlike
// PUBLISH, keyspace events are not broadcast in a Cluster, each node
// publishes its own keys'. It subscribes once a hold has lasted watchAfter,
// and keeps a subscription for keepWatching after the key's last hold
// ended, so a name held again and again is subscribed once. A subscribed
// key costs its Driver a message for each write of its own scripts to it
// (an "expire" at each grant and renewal, a "del" at each release), which
// go-redis reads at a few µs of CPU each: holds shorter than watchAfter, as
// in a Lock/Unlock loop, never pay it, and a loss in a hold's first
// watchAfter is told by the check that follows the subscription (below),
// watchAfter and a round trip later. One worker goroutine sends the
// SUBSCRIBEs and the checks, off the caller's path; one listener per
// connection reads the events.
//
// An event names a key, not a hold: a "del" can be the Driver's own release
// of an earlier hold, or another owner's release from before this hold was
// granted, read late. So an event that may end a hold — any but the writes
// of the Driver's own scripts while a hold lasts — is checked against
// Redis: one pipelined HGET of the owners of the keys in question, and a
// hold's Lost fires only if Redis no longer has its owner. A newer hold of
// the same name has another owner, so it never fires for an older one. The
// same check runs when a subscription is confirmed: for a new one, the key
// could have been deleted between the grant and the SUBSCRIBE; after a
// reconnect (go-redis subscribes again by itself), events published while
// the connection was down are lost. One round trip covers every hold of the
// connection.
//
// Not seen: FLUSHALL and FLUSHDB, which publish no event per key, and
// fields of the hash changed by hand. The next renewal finds those.
package keyspace
