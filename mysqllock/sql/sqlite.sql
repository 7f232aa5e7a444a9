-- Statements of the SQLite dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name. expires_at is
-- in Unix milliseconds of the database's clock, which for SQLite is the
-- clock of the machine that holds the file: {now} is replaced by an
-- expression that reads it once per statement. Lease lengths are passed
-- in microseconds, never a client time. Lines starting with "--" are
-- comments and are not sent.

-- name: now
(CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER))

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name       TEXT    NOT NULL PRIMARY KEY,
  owner      TEXT,
  fence      INTEGER NOT NULL DEFAULT 0,
  expires_at INTEGER
) WITHOUT ROWID

-- name: acquire
-- One atomic statement, as on PostgreSQL: create the row held (fence 1),
-- or take it if it is free or expired. No row comes back when another
-- owner holds the lock. Parameters: name, owner, lease (µs).
INSERT INTO {table} (name, owner, fence, expires_at)
VALUES (?, ?, 1, {now} + (? + 999) / 1000)
ON CONFLICT (name) DO UPDATE
   SET owner = excluded.owner,
       fence = fence + 1,
       expires_at = excluded.expires_at
 WHERE owner IS NULL OR owner = '' OR expires_at IS NULL OR expires_at < {now}
RETURNING fence

-- name: remaining
-- The holder's remaining lease in microseconds, or -1 when the lock looks
-- free. Parameters: name.
SELECT CASE
         WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
         ELSE (expires_at - {now}) * 1000
       END
  FROM {table}
 WHERE name = ?

-- name: renew
-- Parameters: lease (µs), name, owner.
UPDATE {table}
   SET expires_at = {now} + (? + 999) / 1000
 WHERE name = ? AND owner = ? AND expires_at >= {now}

-- name: release
-- The row and its fence stay. Parameters: name, owner.
UPDATE {table}
   SET owner = NULL
 WHERE name = ? AND owner = ? AND expires_at >= {now}

-- name: release_any
-- Parameters: name, owner.
UPDATE {table}
   SET owner = NULL
 WHERE name = ? AND owner = ?

-- name: force_release
-- Parameters: name.
UPDATE {table}
   SET owner = NULL
 WHERE name = ? AND owner IS NOT NULL AND owner <> '' AND expires_at >= {now}

-- name: holds
-- LIKE is case-insensitive on SQLite: compare the prefix with substr
-- (which counts characters, as the driver does). Parameters: prefix
-- length in characters, prefix.
SELECT name, owner, fence, (expires_at - {now}) * 1000
  FROM {table}
 WHERE substr(name, 1, ?) = ?
   AND owner IS NOT NULL AND owner <> '' AND expires_at >= {now}
 ORDER BY name
