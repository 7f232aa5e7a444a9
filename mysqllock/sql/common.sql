-- Statements of package mysqllock that more than one dialect sends as
-- they are. Each dialect's file (mysql.sql, postgres.sql, sqlite.sql) is
-- read after this one: a statement or fragment it names replaces the one
-- here, and it defines the fragments these use ({now}, {lease}, {lapse},
-- {state}). {table} is replaced by the validated, quoted table name, and
-- {x} by the fragment named x. Parameters are named (@name, GORM binds
-- each occurrence). Lines starting with "--" are comments and are not
-- sent.

-- Fragments of acquire, on the row as it was (in an upsert's DO UPDATE, a
-- bare column is the row as it was). PostgreSQL names that row l.
-- name: free
(owner IS NULL OR owner = '' OR expires_at IS NULL OR expires_at < {now})

-- name: lapsed
-- The head's turn has lapsed: the lock has been free for the window, and
-- the turn began before it (a release sets expires_at to its time).
({free} AND (serving_at IS NULL OR serving_at < {lapse}) AND (expires_at IS NULL OR expires_at < {lapse}))

-- name: head
-- It is the waiter's turn: its ticket is served, or the head before it
-- lapsed (the waiter then takes the turn over, skipping the tickets
-- between).
(@ticket > 0 AND @ticket <= tickets AND (@ticket = serving OR (@ticket > serving AND {lapsed})))

-- name: grant
-- The lock goes to this attempt: it is free, and this is a single attempt,
-- or nobody queues, or it is the waiter's turn, or a waiter without a
-- ticket finds the queue's head lapsed.
({free} AND (@wait = 0 OR serving > tickets OR {head} OR (@ticket = 0 AND {lapsed})))

-- name: take_ticket
-- A waiter that did not get the lock takes the next ticket: RETURNING's
-- tickets is its number. The first ticket of an empty queue has its turn
-- at once.
UPDATE {table}
   SET tickets = tickets + 1,
       serving_at = CASE WHEN serving > tickets THEN {now} ELSE serving_at END
 WHERE name = @name
RETURNING {state}

-- name: look
-- A waiter's look between attempts: a plain read, no row lock.
SELECT {state} FROM {table} WHERE name = @name

-- name: renew
UPDATE {table}
   SET expires_at = {now} + {lease}
 WHERE name = @name AND owner = @owner AND expires_at >= {now}

-- name: renew_batch
-- Every lease of one length in a batch; the rows that come back were
-- renewed, the others lost. name IN keeps it on the primary key.
UPDATE {table}
   SET expires_at = {now} + {lease}
 WHERE name IN @names AND (name, owner) IN @pairs AND expires_at >= {now}
RETURNING name, owner

-- name: release
-- Frees the row; it and its fence stay.
UPDATE {table}
   SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner = @owner AND expires_at >= {now}

-- name: release_any
-- Release by owner whatever the lease.
UPDATE {table}
   SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner = @owner

-- name: force_release
UPDATE {table}
   SET owner = NULL, expires_at = {now}
 WHERE name = @name AND owner IS NOT NULL AND owner <> '' AND expires_at >= {now}
