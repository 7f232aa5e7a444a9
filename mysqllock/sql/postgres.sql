-- Statements of the PostgreSQL dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name, and {x} by the
-- fragment named x below. Every time is the database's:
-- statement_timestamp(), fixed for the statement. Parameters are named
-- (@name, GORM binds each occurrence): names, owners, lease lengths in
-- microseconds, gate keys; never a client time. Lines starting with "--"
-- are comments and are not sent. The statements not named here are those
-- of common.sql. The fragments of acquire name the row as it was l, the
-- alias of acquire's INSERT.

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name       VARCHAR(512) COLLATE "C" NOT NULL PRIMARY KEY,
  owner      VARCHAR(255),
  fence      BIGINT      NOT NULL DEFAULT 0,
  expires_at TIMESTAMPTZ,
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

-- Fragments of acquire, on the row as it was (l).
-- name: free
(l.owner IS NULL OR l.owner = '' OR ((l.expires_at IS NULL OR l.expires_at < {now})
  AND (l.lease_id IS NULL OR NOT EXISTS (SELECT 1 FROM {leases} s WHERE s.id = l.lease_id))))

-- name: state
-- What acquire returns and look reads: the holder, the fence, the
-- holder's remaining lease (µs, -1 when released), and the holder's
-- shared lease and what it has left (µs; NULL when there is none).
owner, fence,
CASE WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
     ELSE CAST(EXTRACT(EPOCH FROM (expires_at - {now})) * 1000000 AS BIGINT) END,
lease_id,
(SELECT CAST(EXTRACT(EPOCH FROM (s.expires_at - {now})) * 1000000 AS BIGINT) FROM {leases} s WHERE s.id = lease_id)

-- name: acquire
-- One atomic statement: create the row held (fence 1), or take the
-- existing row if it is free (fence + 1). A grant comes back as granted
-- 1 and the new row; a lock that is not granted as granted 0 and the row
-- as the statement's snapshot saw it, to name the holder.
WITH a AS (
  INSERT INTO {table} AS l (name, owner, fence, expires_at, lease_id)
  VALUES (@name, @owner, 1, {now} + {lease}, {lease_ref})
  ON CONFLICT (name) DO UPDATE SET
    owner      = EXCLUDED.owner,
    fence      = l.fence + 1,
    expires_at = EXCLUDED.expires_at,
    lease_id   = EXCLUDED.lease_id
  WHERE {free}
  RETURNING {state}
)
SELECT 1, a.* FROM a
UNION ALL
SELECT 0, {state} FROM {table} WHERE name = @name AND NOT EXISTS (SELECT 1 FROM a)

-- name: release
-- Frees the row; it and its fence stay (and lease_id, which a free row
-- ignores).
UPDATE {table} SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner = @owner AND {alive}

-- name: release_gated
-- release, and the gate of a hold that came through it (gate.go), in one
-- statement: the count of rows released, and whether the gate was held.
-- The gate is let go after the row is updated (it reads the count) and
-- before the commit: the next waiter's acquire then waits on the row's
-- lock for the commit, and sees the row free.
WITH r AS (
  UPDATE {table} SET owner = NULL, expires_at = {now}
   WHERE name = @name AND owner = @owner AND {alive}
  RETURNING 1
)
SELECT c.n, pg_advisory_unlock(@gate) FROM (SELECT count(*) AS n FROM r) c

-- name: release_any
-- Release by owner whatever the lease.
UPDATE {table} SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner = @owner

-- name: force_release
-- Also counts the release in the hold's shared lease, if it has one: its
-- Driver then checks its rows at its next renewals.
-- The command tag counts the rows released.
WITH r AS (
  UPDATE {table} SET owner = NULL, expires_at = {now}
   WHERE name = @name AND owner IS NOT NULL AND owner <> '' AND {alive}
  RETURNING lease_id
), k AS (
  UPDATE {leases} SET revoked = revoked + 1 WHERE id IN (SELECT lease_id FROM r)
)
SELECT 1 FROM r

-- name: gate_acquire
-- The first attempt of a native wait (gate.go), in one statement: the
-- gate, PostgreSQL's session advisory lock on a 64-bit key, if it is
-- free, and then the row, if it is free too. It returns whether the gate
-- was got, the session (so that a wait of it can be cancelled), the
-- grant's fence (NULL when the row was not granted), and the row as the
-- statement's snapshot saw it, to name the holder. gate_wait waits in
-- the database's queue for the gate, gate_cancel cancels that wait from
-- another session, gate_unlock lets the gate go.
WITH g AS MATERIALIZED (SELECT pg_try_advisory_lock(@gate) AS ok),
a AS (
  INSERT INTO {table} AS l (name, owner, fence, expires_at, lease_id)
  SELECT @name, @owner, 1, {now} + {lease}, {lease_ref} FROM g WHERE g.ok
  ON CONFLICT (name) DO UPDATE SET
    owner      = EXCLUDED.owner,
    fence      = l.fence + 1,
    expires_at = EXCLUDED.expires_at,
    lease_id   = EXCLUDED.lease_id
  WHERE {free}
  RETURNING fence AS granted
)
SELECT g.ok, pg_backend_pid(), a.granted, {state}
  FROM g LEFT JOIN a ON true LEFT JOIN {table} ON name = @name

-- name: gate_wait
SELECT 1 FROM (SELECT pg_advisory_lock(@gate)) g

-- name: gate_cancel
SELECT pg_cancel_backend(CAST(@session AS INTEGER))

-- name: gate_unlock
SELECT pg_advisory_unlock(@gate)

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

-- The weighted kinds (weighted.sql).
-- name: w_create
CREATE TABLE IF NOT EXISTS {weighted} (
  kind       SMALLINT     NOT NULL,
  name       VARCHAR(512) COLLATE "C" NOT NULL,
  owner      VARCHAR(255) COLLATE "C" NOT NULL,
  weight     BIGINT       NOT NULL,
  lim        BIGINT       NOT NULL,
  token      BIGINT       NOT NULL,
  queued     SMALLINT     NOT NULL,
  expires_ms BIGINT       NOT NULL,
  val        BYTEA,
  renewals   BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, name, owner)
)

-- name: w_head
INSERT INTO {weighted} AS w (kind, name, owner, weight, lim, token, queued, expires_ms, renewals)
VALUES (@kind, @name, '', 0, @lim, 0, 0, 0, 0)
ON CONFLICT (kind, name, owner) DO UPDATE SET renewals = w.renewals + 1

-- name: now_ms
CAST(FLOOR(EXTRACT(EPOCH FROM statement_timestamp()) * 1000) AS BIGINT)

-- name: for_update
FOR UPDATE

-- name: w_prefix
name LIKE @prefix ESCAPE '!'
