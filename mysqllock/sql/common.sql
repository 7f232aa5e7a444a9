-- Statements of package mysqllock that more than one dialect sends as
-- they are. Each dialect's file (mysql.sql, postgres.sql, sqlite.sql) is
-- read after this one: a statement or fragment it names replaces the one
-- here, and it defines the fragments these use ({now}, {lease},
-- {state}). {table} is replaced by the validated, quoted table name, and
-- {x} by the fragment named x. Parameters are named (@name, GORM binds
-- each occurrence). Lines starting with "--" are comments and are not
-- sent.

-- Fragments of acquire, on the row as it was (in an upsert's DO UPDATE, a
-- bare column is the row as it was). PostgreSQL names that row l.
-- name: lease_gone
-- The hold's shared lease (D28), if it has one, is gone: never there, or
-- deleted after it ran out. A lease that ran out but is still there keeps
-- its holds from being taken until lease_kill deletes it: so a renewal of
-- the lease and the lease's end are ordered by the lease's row lock.
(lease_id IS NULL OR NOT EXISTS (SELECT 1 FROM {leases} s WHERE s.id = lease_id))

-- name: alive
-- The hold is live: its own lease has not run out, or its shared lease
-- has not.
(expires_at >= {now} OR (lease_id IS NOT NULL AND EXISTS (SELECT 1 FROM {leases} s WHERE s.id = lease_id AND s.expires_at >= {now})))

-- name: free
(owner IS NULL OR owner = '' OR ((expires_at IS NULL OR expires_at < {now}) AND {lease_gone}))

-- name: look
-- The row as it is: a plain read, no row lock. An attempt that did not
-- get the lock reads its holder with it (MySQL, SQLite), and a waiter
-- blocked behind another process's gate (gate.go) looks whether the
-- holder's lease ran out.
SELECT {state} FROM {table} WHERE name = @name

-- name: renew
-- A renewal of the row itself also moves it to the Driver's shared lease,
-- if it has one (@lease_id, or NULL).
UPDATE {table}
   SET expires_at = {now} + {lease}, lease_id = {lease_ref}
 WHERE name = @name AND owner = @owner AND {alive}

-- name: renew_batch
-- Every lease of one length in a batch; the rows that come back were
-- renewed, the others lost. name IN keeps it on the primary key.
UPDATE {table}
   SET expires_at = {now} + {lease}, lease_id = {lease_ref}
 WHERE name IN @names AND (name, owner) IN @pairs AND {alive}
RETURNING name, owner

-- name: release
-- Frees the row; it and its fence stay (and lease_id, which a free row
-- ignores).
UPDATE {table}
   SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner = @owner AND {alive}

-- name: release_any
-- Release by owner whatever the lease.
UPDATE {table}
   SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner = @owner

-- name: force_release
UPDATE {table}
   SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner IS NOT NULL AND owner <> '' AND {alive}

-- name: force_revoke
-- SQLite, before force_release in one transaction: a hold on a shared
-- lease is forced off; its Driver checks its rows at its next renewals.
UPDATE {leases}
   SET revoked = revoked + 1
 WHERE id = (SELECT lease_id FROM {table}
              WHERE name = @name AND owner IS NOT NULL AND owner <> '' AND {alive})

-- name: lease_ref
CAST(@lease_id AS BIGINT)

-- name: probe_table
SELECT 1 FROM {table} WHERE 1 = 0

-- name: probe_column
-- A table of this version: it has lease_id.
SELECT lease_id FROM {table} WHERE 1 = 0

-- name: probe_leases
SELECT id FROM {leases} WHERE 1 = 0

-- name: add_lease_column
ALTER TABLE {table} ADD COLUMN lease_id BIGINT

-- name: lease_create
-- A Driver's shared lease of one length (D28): its id is random, so that
-- an id is never used twice.
INSERT INTO {leases} (id, expires_at, revoked) VALUES (@lease_id, {now} + {lease}, 0)

-- name: lease_renew
-- Renews a shared lease that has not run out; revoked counts the forced
-- releases of its holds.
UPDATE {leases}
   SET expires_at = {now} + {lease}
 WHERE id = @lease_id AND expires_at >= {now}
RETURNING revoked

-- name: lease_kill
-- Ends a shared lease that ran out, so that its holds can be taken; a
-- renewal that was first has moved expires_at, and nothing is deleted.
DELETE FROM {leases} WHERE id = @lease_id AND expires_at < {now}

-- name: lease_gc
-- Every shared lease that ran out (a Driver that stopped, or that made a
-- new one): their holds are free.
DELETE FROM {leases} WHERE expires_at < {now}

-- name: lease_check
-- The holds of a batch still on the shared lease, after a forced release
-- of one of its holds.
SELECT name, fence FROM {table}
 WHERE name IN @names AND (name, fence) IN @pairs AND lease_id = @lease_id
   AND owner IS NOT NULL AND owner <> ''
