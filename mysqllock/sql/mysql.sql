-- Statements of the MySQL / MariaDB dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name, and {x} by the
-- fragment named x below. Every time is the database's: UTC_TIMESTAMP(3),
-- evaluated once per statement, so the session time zone and the clients'
-- clocks do not matter. Parameters are named (@name, GORM binds each
-- occurrence): names, owners, lease lengths in microseconds, gate names;
-- never a client time. Lines starting with "--" are
-- comments and are not sent. The statements not named here are those of
-- common.sql; the comments there and in postgres.sql say what each does,
-- and those here what MySQL does differently.

-- name: now
UTC_TIMESTAMP(3)

-- name: lease
INTERVAL @lease_us MICROSECOND

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name        VARBINARY(512)  NOT NULL,
  owner       VARBINARY(255)  NULL,
  fence       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  expires_at  DATETIME(3)     NULL,
  renew_stamp BINARY(16)      NULL,
  lease_id    BIGINT          NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB

-- name: create_leases
-- renewals changes with every renewal, so that a renewal always changes
-- the row and MySQL counts it.
CREATE TABLE IF NOT EXISTS {leases} (
  id         BIGINT          NOT NULL,
  expires_at DATETIME(3)     NOT NULL,
  revoked    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  renewals   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE = InnoDB

-- name: lease_ref
@lease_id

-- name: lease_renew
-- No RETURNING on UPDATE: lease_revoked reads the count after it.
UPDATE {leases}
   SET expires_at = {now} + {lease}, renewals = renewals + 1
 WHERE id = @lease_id AND expires_at >= {now}

-- name: lease_revoked
SELECT revoked FROM {leases} WHERE id = @lease_id

-- name: force_release
-- Also counts the release in the hold's shared lease, if it has one: its
-- Driver then checks its rows at its next renewals.
UPDATE {table} l LEFT JOIN {leases} s ON s.id = l.lease_id
   SET s.revoked = s.revoked + 1, l.owner = NULL, l.expires_at = {now}
 WHERE l.name = @name AND l.owner IS NOT NULL AND l.owner <> ''
   AND (l.expires_at >= {now} OR s.expires_at >= {now})

-- name: acquire
-- On an existing row (insert creates a new one). LAST_INSERT_ID(expr)
-- returns the new fence in the reply's insert id: no second statement.
UPDATE {table}
   SET owner      = @owner,
       fence      = LAST_INSERT_ID(fence + 1),
       expires_at = {now} + {lease},
       lease_id   = @lease_id
 WHERE name = @name AND {free}

-- name: insert
-- The row does not exist yet: create it held, with fence 1. A duplicate
-- key error means another owner created it first; the driver tries the
-- update again.
INSERT INTO {table} (name, owner, fence, expires_at, lease_id)
VALUES (@name, @owner, 1, {now} + {lease}, @lease_id)

-- name: state
owner, fence,
CASE WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
     ELSE TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) END,
lease_id,
(SELECT TIMESTAMPDIFF(MICROSECOND, {now}, s.expires_at) FROM {leases} s WHERE s.id = lease_id)

-- name: gate_acquire
-- The first attempt of a native wait (gate.go): the row, if it is free
-- and the gate — a user-level lock of the server, named after the table
-- and the lock (GET_LOCK's names are at most 64 characters) — is free
-- too. A grant holds the gate; otherwise gate_held tells whether the
-- session got it (MySQL may evaluate GET_LOCK although the row is held)
-- and names the session, so that a wait of it can be cancelled with KILL
-- QUERY. gate_wait waits in the server's queue for the gate (1: got it;
-- 0 or NULL: timed out or killed), gate_unlock lets it go.
UPDATE {table}
   SET owner      = @owner,
       fence      = LAST_INSERT_ID(fence + 1),
       expires_at = {now} + {lease},
       lease_id   = @lease_id
 WHERE name = @name AND {free} AND GET_LOCK(@gate, 0) = 1

-- name: gate_held
-- Also the row, to name the holder.
SELECT COALESCE(IS_USED_LOCK(@gate) = CONNECTION_ID(), 0), CONNECTION_ID(), {state}
  FROM (SELECT 1) AS x LEFT JOIN {table} ON name = @name

-- name: gate_wait
SELECT GET_LOCK(@gate, @wait_s)

-- name: gate_unlock
SELECT RELEASE_LOCK(@gate)

-- name: release_gated
-- release, and the gate of a hold that came through it, in one
-- statement: RELEASE_LOCK runs in the assignment of owner (which is NULL
-- whatever it returns) as the row is updated, before the commit; the next
-- waiter's statement waits on the row's lock for the commit, and sees the
-- row free. A row that is not released (the hold was lost) leaves the
-- gate held: the driver then sends gate_unlock.
UPDATE {table}
   SET owner = IF(RELEASE_LOCK(@gate) IS NULL, NULL, NULL), expires_at = {now}
 WHERE name = @name AND owner = @owner AND {alive}

-- name: renew_check
-- MySQL counts changed rows, not matched ones: a renewal within the same
-- millisecond as the previous one changes nothing and reports 0 rows.
-- This tells that case from a lost hold.
SELECT COUNT(*)
  FROM {table}
 WHERE name = @name AND owner = @owner AND {alive}

-- name: renew_batch
-- No RETURNING on UPDATE: every renewed row gets the batch's random stamp
-- (so every one changes), and renew_stamped reads back which carry it.
UPDATE {table}
   SET expires_at = {now} + {lease}, renew_stamp = @stamp, lease_id = {lease_ref}
 WHERE name IN @names AND (name, owner) IN @pairs AND {alive}

-- name: renew_stamped
SELECT name, owner FROM {table} WHERE name IN @names AND renew_stamp = @stamp

-- name: holds
-- name is VARBINARY, so LIKE compares bytes (case-sensitive) and can use
-- the primary key. '!' escapes % _ and ! in the prefix.
SELECT l.name, l.owner, l.fence,
       TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), GREATEST(l.expires_at, COALESCE(s.expires_at, l.expires_at)))
  FROM {table} l LEFT JOIN {leases} s ON s.id = l.lease_id
 WHERE l.name LIKE @prefix ESCAPE '!'
   AND l.owner IS NOT NULL AND l.owner <> '' AND (l.expires_at >= {now} OR s.expires_at >= {now})
 ORDER BY l.name

-- The weighted kinds (weighted.sql).
-- name: w_create
CREATE TABLE IF NOT EXISTS {weighted} (
  kind       SMALLINT        NOT NULL,
  name       VARBINARY(512)  NOT NULL,
  owner      VARBINARY(255)  NOT NULL,
  weight     BIGINT          NOT NULL,
  lim        BIGINT          NOT NULL,
  token      BIGINT          NOT NULL,
  queued     SMALLINT        NOT NULL,
  expires_ms BIGINT          NOT NULL,
  val        VARBINARY(4096) NULL,
  renewals   BIGINT          NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, name, owner)
) ENGINE = InnoDB

-- name: w_head
INSERT INTO {weighted} (kind, name, owner, weight, lim, token, queued, expires_ms, renewals)
VALUES (@kind, @name, '', 0, @lim, 0, 0, 0, 0)
ON DUPLICATE KEY UPDATE renewals = renewals + 1

-- name: now_ms
CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)

-- name: for_update
FOR UPDATE

-- name: w_prefix
name LIKE @prefix ESCAPE '!'
