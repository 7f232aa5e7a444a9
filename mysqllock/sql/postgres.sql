-- Statements of the PostgreSQL dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name. Every time is
-- the database's: statement_timestamp(), fixed for the statement. Lease
-- lengths are passed in microseconds, never a client time. Lines starting
-- with "--" are comments and are not sent.

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name       VARCHAR(512) COLLATE "C" NOT NULL PRIMARY KEY,
  owner      VARCHAR(255),
  fence      BIGINT      NOT NULL DEFAULT 0,
  expires_at TIMESTAMPTZ
)

-- name: acquire
-- One atomic statement: create the row held (fence 1), or take it if it
-- is free or expired (fence + 1). ON CONFLICT never raises a duplicate
-- key error. No row comes back when another owner holds the lock.
-- Parameters: name, owner, lease (µs).
INSERT INTO {table} AS l (name, owner, fence, expires_at)
VALUES (?, ?, 1, statement_timestamp() + CAST(? AS BIGINT) * INTERVAL '1 microsecond')
ON CONFLICT (name) DO UPDATE
   SET owner = EXCLUDED.owner,
       fence = l.fence + 1,
       expires_at = EXCLUDED.expires_at
 WHERE l.owner IS NULL OR l.owner = '' OR l.expires_at IS NULL OR l.expires_at < statement_timestamp()
RETURNING fence

-- name: remaining
-- The holder's remaining lease in microseconds, or -1 when the lock looks
-- free. Parameters: name.
SELECT CASE
         WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
         ELSE CAST(EXTRACT(EPOCH FROM (expires_at - statement_timestamp())) * 1000000 AS BIGINT)
       END
  FROM {table}
 WHERE name = ?

-- name: renew
-- Parameters: lease (µs), name, owner.
UPDATE {table}
   SET expires_at = statement_timestamp() + CAST(? AS BIGINT) * INTERVAL '1 microsecond'
 WHERE name = ? AND owner = ? AND expires_at >= statement_timestamp()

-- name: release
-- Frees the row (it and its fence stay) and wakes the waiters of every
-- driver listening on the table's channel; the notification is delivered
-- at commit. The command tag counts the rows released.
-- Parameters: name, owner, channel.
WITH r AS (
  UPDATE {table}
     SET owner = NULL
   WHERE name = ? AND owner = ? AND expires_at >= statement_timestamp()
  RETURNING name
)
SELECT pg_notify(?, r.name) FROM r

-- name: release_any
-- Release by owner whatever the lease. Parameters: name, owner, channel.
WITH r AS (
  UPDATE {table}
     SET owner = NULL
   WHERE name = ? AND owner = ?
  RETURNING name
)
SELECT pg_notify(?, r.name) FROM r

-- name: force_release
-- Parameters: name, channel.
WITH r AS (
  UPDATE {table}
     SET owner = NULL
   WHERE name = ? AND owner IS NOT NULL AND owner <> '' AND expires_at >= statement_timestamp()
  RETURNING name
)
SELECT pg_notify(?, r.name) FROM r

-- name: holds
-- name has the "C" collation, so LIKE compares bytes and can use the
-- primary key. '!' escapes % _ and ! in the prefix.
-- Parameters: prefix pattern.
SELECT name, owner, fence,
       CAST(EXTRACT(EPOCH FROM (expires_at - statement_timestamp())) * 1000000 AS BIGINT)
  FROM {table}
 WHERE name LIKE ? ESCAPE '!'
   AND owner IS NOT NULL AND owner <> '' AND expires_at >= statement_timestamp()
 ORDER BY name
