-- Statements of the MySQL / MariaDB dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name. Every time is
-- the database's: UTC_TIMESTAMP(3), evaluated once per statement, so the
-- session time zone and the clients' clocks do not matter. Parameters are
-- names, owners and lease lengths in microseconds, never a client time.
-- Lines starting with "--" are comments and are not sent.

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name       VARBINARY(512)  NOT NULL,
  owner      VARBINARY(255)  NULL,
  fence      BIGINT UNSIGNED NOT NULL DEFAULT 0,
  expires_at DATETIME(3)     NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB

-- name: acquire
-- Take an existing row that is free or expired. The new owner is unique,
-- so a matched row always changes and RowsAffected is 1 with or without
-- CLIENT_FOUND_ROWS. LAST_INSERT_ID(expr) returns the new fence in the
-- same reply (the OK packet's insert id): no second statement.
-- Parameters: owner, lease (µs), name.
UPDATE {table}
   SET owner = ?,
       fence = LAST_INSERT_ID(fence + 1),
       expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
 WHERE name = ?
   AND (owner IS NULL OR owner = '' OR expires_at IS NULL OR expires_at < UTC_TIMESTAMP(3))

-- name: insert
-- The row does not exist yet: create it held, with fence 1. A duplicate
-- key error means another owner created it first; the driver maps it.
-- Parameters: name, owner, lease (µs).
INSERT INTO {table} (name, owner, fence, expires_at)
VALUES (?, ?, 1, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND)

-- name: remaining
-- What a waiter reads between two tries: the holder's remaining lease in
-- microseconds, or -1 when the lock looks free. A plain read: it takes no
-- row lock. Parameters: name.
SELECT CASE
         WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
         ELSE TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
       END
  FROM {table}
 WHERE name = ?

-- name: renew
-- Parameters: lease (µs), name, owner.
UPDATE {table}
   SET expires_at = UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND
 WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)

-- name: renew_check
-- MySQL counts changed rows, not matched ones: a renewal within the same
-- millisecond as the previous one changes nothing and reports 0 rows.
-- This tells that case from a lost hold. Parameters: name, owner.
SELECT COUNT(*)
  FROM {table}
 WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)

-- name: release
-- The row and its fence stay. Parameters: name, owner.
UPDATE {table}
   SET owner = NULL
 WHERE name = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(3)

-- name: release_any
-- Release by owner whatever the lease, for a grant that may have happened
-- while Acquire failed. Parameters: name, owner.
UPDATE {table}
   SET owner = NULL
 WHERE name = ? AND owner = ?

-- name: force_release
-- Parameters: name.
UPDATE {table}
   SET owner = NULL
 WHERE name = ? AND owner IS NOT NULL AND owner <> '' AND expires_at >= UTC_TIMESTAMP(3)

-- name: holds
-- name is VARBINARY, so LIKE compares bytes (case-sensitive) and can use
-- the primary key. '!' escapes % _ and ! in the prefix.
-- Parameters: prefix pattern.
SELECT name, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
  FROM {table}
 WHERE name LIKE ? ESCAPE '!'
   AND owner IS NOT NULL AND owner <> '' AND expires_at >= UTC_TIMESTAMP(3)
 ORDER BY name
