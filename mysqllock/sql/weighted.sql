-- Statements of the weighted kinds (semaphores, read-write locks,
-- elections; weighted.go) that every dialect sends as they are. Each
-- dialect's file defines the fragments they use ({now_ms}, {for_update},
-- {w_prefix}) and its own w_create and w_head. {weighted} is the
-- validated, quoted name of the table of weighted holds, the lock table's
-- name with "_weighted" after it.
--
-- A weighted name (kind, name) has rows in that table: its head (owner
-- ''), which keeps the name's limit and the last token it issued (tokens
-- and places are numbered by one counter), a row per hold (queued 0) and a
-- row per place of a polled wait (queued 1, token its number in the
-- queue). Every change of a name's rows is one transaction that starts
-- with w_head, the upsert that locks the head row: the changes of one name
-- are serialised by it, on every dialect. Every time is the database's
-- clock in Unix milliseconds ({now_ms}); expires_ms ends a hold's lease and
-- a place's.

-- name: w_prune
-- The holds and places whose leases ran out.
DELETE FROM {weighted}
 WHERE kind = @kind AND name = @name AND owner <> '' AND expires_ms < {now_ms}

-- name: w_rows
-- Every row of the name, the head among them, with what each has left.
SELECT owner, weight, lim, token, queued, expires_ms - {now_ms}, val
  FROM {weighted}
 WHERE kind = @kind AND name = @name
{for_update}

-- name: w_insert
INSERT INTO {weighted} (kind, name, owner, weight, lim, token, queued, expires_ms, val, renewals)
VALUES (@kind, @name, @owner, @weight, @lim, @token, @queued, {now_ms} + @lease_ms, @val, 0)

-- name: w_grant_place
-- A place becomes its owner's hold.
UPDATE {weighted}
   SET weight = @weight, lim = @lim, token = @token, queued = 0,
       expires_ms = {now_ms} + @lease_ms, val = @val, renewals = renewals + 1
 WHERE kind = @kind AND name = @name AND owner = @owner AND queued = 1

-- name: w_keep_place
UPDATE {weighted}
   SET expires_ms = {now_ms} + @lease_ms, renewals = renewals + 1
 WHERE kind = @kind AND name = @name AND owner = @owner AND queued = 1

-- name: w_set_head
UPDATE {weighted}
   SET token = @token, lim = @lim, renewals = renewals + 1
 WHERE kind = @kind AND name = @name AND owner = ''

-- name: w_alive
-- The hold of @owner, while its lease runs.
kind = @kind AND name = @name AND owner = @owner AND queued = 0 AND expires_ms >= {now_ms}

-- name: w_renew
-- renewals changes with every statement, so that MySQL counts a renewal
-- within the same millisecond as a changed row.
UPDATE {weighted}
   SET expires_ms = {now_ms} + @lease_ms, renewals = renewals + 1
 WHERE {w_alive}

-- name: w_release
DELETE FROM {weighted} WHERE {w_alive}

-- name: w_release_any
-- The hold or place of @owner, whatever its lease.
DELETE FROM {weighted} WHERE kind = @kind AND name = @name AND owner = @owner

-- name: w_dequeue
DELETE FROM {weighted} WHERE kind = @kind AND name = @name AND owner = @owner AND queued = 1

-- name: w_downgrade
UPDATE {weighted}
   SET weight = @weight, renewals = renewals + 1
 WHERE {w_alive}

-- name: w_proclaim
UPDATE {weighted}
   SET val = @val, renewals = renewals + 1
 WHERE {w_alive}

-- name: w_holds
SELECT kind, name, owner, token, weight, lim, val, expires_ms - {now_ms}
  FROM {weighted}
 WHERE {w_prefix} AND owner <> '' AND queued = 0 AND expires_ms >= {now_ms}
 ORDER BY name, kind, token

-- name: w_probe
SELECT 1 FROM {weighted} WHERE 1 = 0
