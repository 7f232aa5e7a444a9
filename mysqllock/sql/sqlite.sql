-- Statements of the SQLite dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name, and {x} by the
-- fragment named x below. Times are Unix milliseconds of the database's
-- clock, which for SQLite is the clock of the machine that holds the file:
-- {now} reads it once per statement. Parameters are named (@name, GORM
-- binds each occurrence): names, owners, lease lengths in microseconds;
-- never a client time. Lines starting with "--" are comments and are not
-- sent. The statements not named here are those of common.sql; the
-- comments there and in postgres.sql say what each does.

-- name: now
CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)

-- name: lease
((@lease_us + 999) / 1000)

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name       TEXT    NOT NULL PRIMARY KEY,
  owner      TEXT,
  fence      INTEGER NOT NULL DEFAULT 0,
  expires_at INTEGER,
  lease_id   INTEGER
) WITHOUT ROWID

-- name: create_leases
CREATE TABLE IF NOT EXISTS {leases} (
  id         INTEGER NOT NULL PRIMARY KEY,
  expires_at INTEGER NOT NULL,
  revoked    INTEGER NOT NULL DEFAULT 0
)

-- name: add_lease_column
ALTER TABLE {table} ADD COLUMN lease_id INTEGER

-- name: state
owner, fence,
CASE WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1 ELSE (expires_at - {now}) * 1000 END,
lease_id, (SELECT (s.expires_at - {now}) * 1000 FROM {leases} s WHERE s.id = lease_id)

-- name: acquire
-- The row comes back only when the lock is granted; look reads the
-- holder otherwise.
INSERT INTO {table} (name, owner, fence, expires_at, lease_id)
VALUES (@name, @owner, 1, {now} + {lease}, {lease_ref})
ON CONFLICT (name) DO UPDATE SET
  owner      = excluded.owner,
  fence      = fence + 1,
  expires_at = excluded.expires_at,
  lease_id   = excluded.lease_id
WHERE {free}
RETURNING {state}

-- name: holds
-- LIKE is case-insensitive on SQLite: compare the prefix with substr
-- (which counts characters, as the driver does).
SELECT l.name, l.owner, l.fence, (max(l.expires_at, coalesce(s.expires_at, l.expires_at)) - {now}) * 1000
  FROM {table} l LEFT JOIN {leases} s ON s.id = l.lease_id
 WHERE substr(l.name, 1, @prefix_len ) = @prefix
   AND l.owner IS NOT NULL AND l.owner <> '' AND (l.expires_at >= {now} OR s.expires_at >= {now})
 ORDER BY l.name

-- The weighted kinds (weighted.sql). A transaction starts with w_head, a
-- write, so it takes the file's write lock first and never has to
-- upgrade a read.
-- name: w_create
CREATE TABLE IF NOT EXISTS {weighted} (
  kind       INTEGER NOT NULL,
  name       TEXT    NOT NULL,
  owner      TEXT    NOT NULL,
  weight     INTEGER NOT NULL,
  lim        INTEGER NOT NULL,
  token      INTEGER NOT NULL,
  queued     INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  val        BLOB,
  renewals   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, name, owner)
) WITHOUT ROWID

-- name: w_head
INSERT INTO {weighted} (kind, name, owner, weight, lim, token, queued, expires_ms, renewals)
VALUES (@kind, @name, '', 0, @lim, 0, 0, 0, 0)
ON CONFLICT (kind, name, owner) DO UPDATE SET renewals = renewals + 1

-- name: now_ms
{now}

-- name: for_update


-- name: w_prefix
substr(name, 1, @prefix_len) = @prefix
