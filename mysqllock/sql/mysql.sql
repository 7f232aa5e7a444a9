-- Statements of the MySQL / MariaDB dialect of package mysqllock.
--
-- {table} is replaced by the validated, quoted table name, and {x} by the
-- fragment named x below. Every time is the database's: UTC_TIMESTAMP(3),
-- evaluated once per statement, so the session time zone and the clients'
-- clocks do not matter. Parameters are named (@name, GORM binds each
-- occurrence): names, owners, lease lengths and windows in microseconds,
-- ticket numbers; never a client time. Lines starting with "--" are
-- comments and are not sent. The statements not named here are those of
-- common.sql; the comments there and in postgres.sql say what each does,
-- and those here what MySQL does differently.

-- name: now
UTC_TIMESTAMP(3)

-- name: lease
INTERVAL @lease_us MICROSECOND

-- name: lapse
({now} - INTERVAL @window_us MICROSECOND)

-- name: create
CREATE TABLE IF NOT EXISTS {table} (
  name        VARBINARY(512)  NOT NULL,
  owner       VARBINARY(255)  NULL,
  fence       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  expires_at  DATETIME(3)     NULL,
  tickets     BIGINT UNSIGNED NOT NULL DEFAULT 0,
  serving     BIGINT UNSIGNED NOT NULL DEFAULT 1,
  serving_at  DATETIME(3)     NULL,
  renew_stamp BINARY(16)      NULL,
  PRIMARY KEY (name)
) ENGINE = InnoDB

-- name: acquire
-- On an existing row (insert creates a new one). The WHERE clause
-- decides, on the row as it was; MySQL then assigns the columns from left
-- to right, each expression seeing the columns already assigned, so the
-- turn moves (serving) before serving_at reads it. LAST_INSERT_ID(expr)
-- returns the new fence in the reply's insert id: no second statement.
-- A granted ticket from serving on was the waiter's turn (no queue puts a
-- ticket below serving): the turn passes to the next ticket.
UPDATE {table}
   SET owner      = @owner,
       fence      = LAST_INSERT_ID(fence + 1),
       expires_at = {now} + {lease},
       serving_at = IF(@ticket > 0 AND @ticket >= serving AND @ticket <= tickets, {now}, serving_at),
       serving    = IF(@ticket > 0 AND @ticket >= serving AND @ticket <= tickets, @ticket + 1, serving)
 WHERE name = @name AND {grant}

-- name: take_ticket
-- The ticket comes back as the insert id.
UPDATE {table}
   SET serving_at = IF(serving > tickets, {now}, serving_at),
       tickets    = LAST_INSERT_ID(tickets + 1)
 WHERE name = @name

-- name: insert
-- The row does not exist yet: create it held, with fence 1. A duplicate
-- key error means another owner created it first; the driver tries the
-- update again.
INSERT INTO {table} (name, owner, fence, expires_at, tickets, serving, serving_at)
VALUES (@name, @owner, 1, {now} + {lease}, 0, 1, NULL)

-- name: look
SELECT owner, fence,
       CASE WHEN owner IS NULL OR owner = '' OR expires_at IS NULL THEN -1
            ELSE TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) END,
       tickets, serving,
       CASE WHEN {lapsed} THEN 1 ELSE 0 END,
       TIMESTAMPDIFF(MICROSECOND, serving_at, UTC_TIMESTAMP(6))
  FROM {table}
 WHERE name = @name

-- name: renew_check
-- MySQL counts changed rows, not matched ones: a renewal within the same
-- millisecond as the previous one changes nothing and reports 0 rows.
-- This tells that case from a lost hold.
SELECT COUNT(*)
  FROM {table}
 WHERE name = @name AND owner = @owner AND expires_at >= {now}

-- name: renew_batch
-- No RETURNING on UPDATE: every renewed row gets the batch's random stamp
-- (so every one changes), and renew_stamped reads back which carry it.
UPDATE {table}
   SET expires_at = {now} + {lease}, renew_stamp = @stamp
 WHERE name IN @names AND (name, owner) IN @pairs AND expires_at >= {now}

-- name: renew_stamped
SELECT name, owner FROM {table} WHERE name IN @names AND renew_stamp = @stamp

-- name: holds
-- name is VARBINARY, so LIKE compares bytes (case-sensitive) and can use
-- the primary key. '!' escapes % _ and ! in the prefix.
SELECT name, owner, fence, TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
  FROM {table}
 WHERE name LIKE @prefix ESCAPE '!'
   AND owner IS NOT NULL AND owner <> '' AND expires_at >= {now}
 ORDER BY name
