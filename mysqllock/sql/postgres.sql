-- Statements of the PostgreSQL dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name, and {x} by the
-- fragment named x below. Every time is the database's:
-- statement_timestamp(), fixed for the statement. Parameters are named
-- (@name, GORM binds each occurrence): names, owners, lease lengths and
-- windows in microseconds, ticket numbers; never a client time. Lines
-- starting with "--" are comments and are not sent. The statements not
-- named here are those of common.sql. The fragments of acquire name the
-- row as it was l, the alias of acquire's INSERT, and the releases notify
-- the next waiter.

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name       VARCHAR(512) COLLATE "C" NOT NULL PRIMARY KEY,
  owner      VARCHAR(255),
  fence      BIGINT      NOT NULL DEFAULT 0,
  expires_at TIMESTAMPTZ,
  tickets    BIGINT      NOT NULL DEFAULT 0,
  serving    BIGINT      NOT NULL DEFAULT 1,
  serving_at TIMESTAMPTZ,
  lease_id   BIGINT
)

-- name: create_leases
CREATE TABLE IF NOT EXISTS {leases} (
  id         BIGINT      NOT NULL PRIMARY KEY,
  expires_at TIMESTAMPTZ NOT NULL,
  revoked    BIGINT      NOT NULL DEFAULT 0
)

-- name: now
statement_timestamp()

-- name: lease
(CAST(@lease_us AS BIGINT) * INTERVAL '1 microsecond')

-- name: lapse
({now} - CAST(@window_us AS BIGINT) * INTERVAL '1 microsecond')

-- name: ticket
CAST(@ticket AS BIGINT)

-- Fragments of acquire, on the row as it was (l).
-- name: free
(l.owner IS NULL OR l.owner = '' OR ((l.expires_at IS NULL OR l.expires_at < {now})
  AND (l.lease_id IS NULL OR NOT EXISTS (SELECT 1 FROM {leases} s WHERE s.id = l.lease_id))))

-- name: empty
(l.serving > l.tickets)

-- name: lapsed
-- The head's turn has lapsed: the lock has been free for the window, and
-- the turn began before it (a release sets expires_at to its time).
({free} AND (l.serving_at IS NULL OR l.serving_at < {lapse}) AND (l.expires_at IS NULL OR l.expires_at < {lapse}))

-- name: head
-- It is the waiter's turn: its ticket is served, or the head before it
-- lapsed (the waiter then takes the turn over, skipping the tickets
-- between).
({ticket} > 0 AND {ticket} <= l.tickets AND ({ticket} = l.serving OR ({ticket} > l.serving AND {lapsed})))

-- name: grant
({free} AND (@wait = 0 OR {empty} OR {head} OR ({ticket} = 0 AND {lapsed})))

-- name: state
-- What acquire returns and look reads: the holder, the fence, the
-- holder's remaining lease (µs, -1 when released), the queue, whether its
-- head has lapsed, how long ago the turn moved (µs), and the holder's
-- shared lease and what it has left (µs; NULL when there is none).
owner, fence,
CASE WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
     ELSE CAST(EXTRACT(EPOCH FROM (expires_at - {now})) * 1000000 AS BIGINT) END,
tickets, serving,
CASE WHEN (owner IS NULL OR owner = '' OR ((expires_at IS NULL OR expires_at < {now}) AND {lease_gone}))
      AND (serving_at IS NULL OR serving_at < {lapse}) AND (expires_at IS NULL OR expires_at < {lapse}) THEN 1 ELSE 0 END,
CAST(EXTRACT(EPOCH FROM ({now} - serving_at)) * 1000000 AS BIGINT),
lease_id,
(SELECT CAST(EXTRACT(EPOCH FROM (s.expires_at - {now})) * 1000000 AS BIGINT) FROM {leases} s WHERE s.id = lease_id)

-- name: acquire
-- One atomic statement: create the row held (fence 1), or take the
-- existing row if it is free and this is a single attempt, or nobody
-- queues, or it is the waiter's turn (fence + 1; the turn then passes to
-- the next ticket). No row comes back when the lock is not granted.
INSERT INTO {table} AS l (name, owner, fence, expires_at, tickets, serving, serving_at, lease_id)
VALUES (@name, @owner, 1, {now} + {lease}, 0, 1, NULL, {lease_ref})
ON CONFLICT (name) DO UPDATE SET
  owner      = EXCLUDED.owner,
  fence      = l.fence + 1,
  expires_at = EXCLUDED.expires_at,
  lease_id   = EXCLUDED.lease_id,
  serving    = CASE WHEN {ticket} > 0 AND {ticket} >= l.serving AND {ticket} <= l.tickets THEN {ticket} + 1 ELSE l.serving END,
  serving_at = CASE WHEN {ticket} > 0 AND {ticket} >= l.serving AND {ticket} <= l.tickets THEN {now} ELSE l.serving_at END
WHERE {grant}
RETURNING {state}

-- name: notify
-- The payload of a release's notification: the ticket whose turn it is,
-- and the name.
SELECT pg_notify(@channel , CAST(r.serving AS TEXT) || ' ' || r.name) FROM r

-- name: release
-- Frees the row (it and its fence stay) and wakes the waiter whose turn
-- it is, in every driver listening on the table's channel; the
-- notification is delivered at commit. The command tag counts the rows
-- released.
WITH r AS (
  UPDATE {table} SET owner = NULL, expires_at = {now}
   WHERE name = @name AND owner = @owner AND {alive}
  RETURNING name, serving
)
{notify}

-- name: release_any
-- Release by owner whatever the lease.
WITH r AS (
  UPDATE {table} SET owner = NULL, expires_at = {now}
   WHERE name = @name AND owner = @owner
  RETURNING name, serving
)
{notify}

-- name: force_release
-- Also counts the release in the hold's shared lease, if it has one: its
-- Driver then checks its rows at its next renewals.
WITH r AS (
  UPDATE {table} SET owner = NULL, expires_at = {now}
   WHERE name = @name AND owner IS NOT NULL AND owner <> '' AND {alive}
  RETURNING name, serving, lease_id
), k AS (
  UPDATE {leases} SET revoked = revoked + 1 WHERE id IN (SELECT lease_id FROM r)
)
{notify}

-- name: holds
-- name has the "C" collation, so LIKE compares bytes and can use the
-- primary key. '!' escapes % _ and ! in the prefix.
-- A hold on a shared lease lasts as long as the later of its own lease
-- and the shared one.
SELECT l.name, l.owner, l.fence,
       CAST(EXTRACT(EPOCH FROM (GREATEST(l.expires_at, s.expires_at) - {now})) * 1000000 AS BIGINT)
  FROM {table} l LEFT JOIN {leases} s ON s.id = l.lease_id
 WHERE l.name LIKE @prefix ESCAPE '!'
   AND l.owner IS NOT NULL AND l.owner <> '' AND (l.expires_at >= {now} OR s.expires_at >= {now})
 ORDER BY l.name
