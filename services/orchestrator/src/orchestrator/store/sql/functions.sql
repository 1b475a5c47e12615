-- The current definition of every function of the store, one place to read them. The migration
-- runner applies this file after the numbered steps, in their transaction and under their lock,
-- on every start: CREATE OR REPLACE, so applying it again changes nothing. The steps that first
-- made these functions keep them as they were then (history; the body here is the one that
-- counts). A new function needs only this file; dropping one, or changing its arguments or its
-- result (which CREATE OR REPLACE cannot), needs a step too. Advisory-lock ids are literals, each
-- followed by a comment naming its constant in orchestrator/store/locks.py.
--
-- Locks, always in this order: a turn request's (TURN_REQUEST_LOCK), the session's
-- (SESSION_LOCK, hashtext(session id)), then task rows, then the events lock (EVENTS_LOCK, held to
-- the commit so event ids become visible in order).

-- Now, in the database's clock (replicas' clocks may differ).
CREATE OR REPLACE FUNCTION crayfish_now() RETURNS double precision
    LANGUAGE sql VOLATILE
AS $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$;

-- Appends one event and wakes every replica's readers. Ids are taken under one lock held to the
-- end of the transaction, so they become visible in order: a reader that has seen id N never
-- finds a smaller id later. Unless `p_durable` (a task's terminal event, written with its final
-- state), the commit does not wait for the disk, which keeps the lock short: events are a
-- progress report, the history and a task's outcome are written with synchronous commits.
CREATE OR REPLACE FUNCTION crayfish_add_event(
    p_task_id text, p_type text, p_data json, p_ts double precision, p_durable boolean
)
    RETURNS TABLE (id bigint, seq integer)
    LANGUAGE plpgsql
AS $$
DECLARE
    new_id bigint;
    new_seq integer;
BEGIN
    IF NOT p_durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    PERFORM pg_advisory_xact_lock(7210481);  -- EVENTS_LOCK
    new_id := nextval('events_id_seq');
    SELECT coalesce(max(e.seq), 0) + 1 INTO new_seq FROM events e WHERE e.task_id = p_task_id;
    INSERT INTO events (id, task_id, seq, type, data, ts)
        VALUES (new_id, p_task_id, new_seq, p_type, p_data, p_ts);
    PERFORM pg_notify('crayfish_events', p_task_id);
    RETURN QUERY SELECT new_id, new_seq;
END;
$$;

-- Appends events of one task under the events lock and notifies its readers. Their `seq` are
-- given by the runner that numbered them (the one writer of a running task's stream), or, when
-- `p_seqs` is NULL, follow the task's last. Unless `p_durable`, the commit does not wait for the
-- disk: events are a progress report (a task's outcome and terminal event are durable).
CREATE OR REPLACE FUNCTION crayfish_put_events(
    p_task_id text, p_seqs integer[], p_types text[], p_datas json[], p_tss double precision[],
    p_durable boolean
)
    RETURNS void
    LANGUAGE plpgsql
AS $$
DECLARE
    last_seq integer := 0;
BEGIN
    IF NOT p_durable THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    PERFORM pg_advisory_xact_lock(7210481);  -- EVENTS_LOCK
    IF p_seqs IS NULL THEN
        SELECT coalesce(max(e.seq), 0) INTO last_seq FROM events e WHERE e.task_id = p_task_id;
    END IF;
    INSERT INTO events (id, task_id, seq, type, data, ts)
        SELECT nextval('events_id_seq'), p_task_id, coalesce(p_seqs[item.n], last_seq + item.n),
               item.type, item.data, item.ts
        FROM unnest(p_types, p_datas, p_tss) WITH ORDINALITY AS item(type, data, ts, n)
        ORDER BY item.n;
    PERFORM pg_notify('crayfish_events', p_task_id);
END;
$$;

-- Appends records to a session (made on first use) in their order: the one way history is
-- written. `p_delta` is the change of its message count, `p_imported` a legacy_imports name to
-- mark with it (the transcript mirror's file). Returns each record's seq with the session's
-- created_at (a session deleted and made again under its id has another).
CREATE OR REPLACE FUNCTION crayfish_append_records(
    p_session text, p_title text, p_delta integer, p_now double precision, p_kinds text[],
    p_bodies json[], p_imported text
)
    RETURNS TABLE (seq bigint, created_at double precision)
    LANGUAGE plpgsql
AS $$
DECLARE
    made double precision;
BEGIN
    INSERT INTO sessions AS s (id, title, message_count, created_at, updated_at)
        VALUES (p_session, p_title, p_delta, p_now, p_now)
        ON CONFLICT (id) DO UPDATE SET message_count = s.message_count + p_delta,
            updated_at = p_now,
            title = CASE WHEN s.title = '' THEN p_title ELSE s.title END
        RETURNING s.created_at INTO made;
    IF p_imported IS NOT NULL THEN
        INSERT INTO legacy_imports (name, imported_at) VALUES (p_imported, p_now)
            ON CONFLICT (name) DO NOTHING;
    END IF;
    RETURN QUERY
        INSERT INTO session_records AS r (session_id, kind, body, created_at)
            SELECT p_session, item.kind, item.body, p_now
            FROM unnest(p_kinds, p_bodies) WITH ORDINALITY AS item(kind, body, n)
            ORDER BY item.n
        RETURNING r.seq, made;
END;
$$;

-- Records a task with its `task.queued` event (durable: the acknowledgement). When `p_runner` is
-- given and the session has no other queued or running task, the task starts at once on that
-- runner (`task.started` too); otherwise it waits in its session's line and claimers are told
-- ('?'). A task id that exists already is left as it is (`created` false).
CREATE OR REPLACE FUNCTION crayfish_submit(
    p_id text, p_session text, p_kind text, p_message text, p_created double precision,
    p_images json, p_runner text, p_now double precision, p_trace json
)
    RETURNS TABLE (created boolean, status text)
    LANGUAGE plpgsql
AS $$
DECLARE
    data json := json_build_object('session_id', p_session, 'kind', p_kind);
    start boolean;
BEGIN
    PERFORM pg_advisory_xact_lock(72104, hashtext(p_session));  -- SESSION_LOCK
    INSERT INTO tasks (id, session_id, kind, message, status, created_at, images, trace)
        VALUES (p_id, p_session, p_kind, p_message, 'queued', p_created, p_images, p_trace)
        ON CONFLICT (id) DO NOTHING;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, t.status FROM tasks t WHERE t.id = p_id;
        RETURN;
    END IF;
    start := p_runner IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM tasks t
        WHERE t.session_id = p_session AND t.status IN ('queued', 'running') AND t.id <> p_id
    );
    IF start THEN
        UPDATE tasks t SET status = 'running', runner = p_runner, started_at = p_now
            WHERE t.id = p_id;
        PERFORM crayfish_put_events(
            p_id, ARRAY[1, 2], ARRAY['task.queued', 'task.started'], ARRAY[data, data],
            ARRAY[p_created, p_now], true
        );
        RETURN QUERY SELECT true, 'running'::text;
    ELSE
        PERFORM crayfish_put_events(
            p_id, ARRAY[1], ARRAY['task.queued'], ARRAY[data], ARRAY[p_created], true
        );
        PERFORM pg_notify('crayfish_events', '?');
        RETURN QUERY SELECT true, 'queued'::text;
    END IF;
END;
$$;

-- Starts up to `p_limit` tasks for `p_runner`: heads of their lines whose session runs nothing.
-- A session another transaction holds (a submit, a delete) is left for the next claim. The
-- events go last: the events lock is never held while a row lock is awaited.
CREATE OR REPLACE FUNCTION crayfish_claim(p_runner text, p_limit integer, p_now double precision)
    RETURNS SETOF tasks
    LANGUAGE plpgsql
AS $$
DECLARE
    candidate record;
    claimed tasks;
    started tasks[] := ARRAY[]::tasks[];
BEGIN
    -- Not waited for on disk: a start lost in a crash leaves its task queued, and the turn's
    -- first durable write (its acceptance) makes this one durable too.
    PERFORM set_config('synchronous_commit', 'off', true);
    FOR candidate IN
        SELECT q.id, q.session_id FROM tasks q
        WHERE q.status = 'queued'
          AND NOT EXISTS (
              SELECT 1 FROM tasks o
              WHERE o.session_id = q.session_id AND o.status IN ('queued', 'running')
                AND (o.status = 'running' OR o.line < q.line))
        ORDER BY q.line LIMIT p_limit
    LOOP
        CONTINUE WHEN NOT pg_try_advisory_xact_lock(  -- SESSION_LOCK
            72104, hashtext(candidate.session_id)
        );
        -- Checked again under the session's lock, in a fresh snapshot.
        UPDATE tasks t SET status = 'running', runner = p_runner, started_at = p_now
            WHERE t.id = candidate.id AND t.status = 'queued'
              AND NOT EXISTS (
                  SELECT 1 FROM tasks o
                  WHERE o.session_id = t.session_id AND o.status IN ('queued', 'running')
                    AND (o.status = 'running' OR o.line < t.line))
            RETURNING t.* INTO claimed;
        IF FOUND THEN
            started := started || claimed;
        END IF;
    END LOOP;
    FOREACH claimed IN ARRAY started LOOP
        PERFORM crayfish_put_events(
            claimed.id, NULL, ARRAY['task.started'],
            ARRAY[json_build_object('session_id', claimed.session_id, 'kind', claimed.kind)],
            ARRAY[claimed.started_at], false
        );
        RETURN NEXT claimed;
    END LOOP;
END;
$$;

-- Ends a task (from one of `p_from`) with its outcome, the records its turn still held (its
-- answer) and its last events (what its outbox still held, then the terminal event; numbered as
-- crayfish_put_events says), durably; tells its waiters ('!' || id) and, when its session has
-- more in line, the claimers ('?'). False if it was not in one of `p_from`.
CREATE OR REPLACE FUNCTION crayfish_finish(
    p_id text, p_from text[], p_status text, p_result text, p_error text, p_delivered boolean,
    p_usage jsonb, p_now double precision, p_seqs integer[], p_types text[], p_datas json[],
    p_tss double precision[], p_title text, p_delta integer, p_kinds text[], p_bodies json[],
    p_imported text
)
    RETURNS boolean
    LANGUAGE plpgsql
AS $$
DECLARE
    session text;
    was text;
BEGIN
    SELECT t.session_id, t.status INTO session, was FROM tasks t WHERE t.id = p_id FOR UPDATE;
    IF NOT FOUND OR NOT was = ANY (p_from) THEN
        RETURN false;
    END IF;
    UPDATE tasks t SET status = p_status, result = p_result, error = p_error,
            delivered = p_delivered, usage = p_usage, finished_at = p_now
        WHERE t.id = p_id;
    -- The turn's last message group (its answer), with its outcome: only a running turn's.
    IF was = 'running' AND cardinality(p_kinds) > 0 THEN
        PERFORM crayfish_append_records(
            session, p_title, p_delta, p_now, p_kinds, p_bodies, p_imported
        );
    END IF;
    PERFORM crayfish_put_events(p_id, p_seqs, p_types, p_datas, p_tss, true);
    PERFORM pg_notify('crayfish_events', '!' || p_id);
    IF EXISTS (SELECT 1 FROM tasks q WHERE q.session_id = session AND q.status = 'queued') THEN
        PERFORM pg_notify('crayfish_events', '?');
    END IF;
    RETURN true;
END;
$$;

-- The earlier request a new one repeats, by `p_match`: 'key' (the same Idempotency-Key, at any
-- time), 'retry' (a client's declared retry: the same fingerprint, its turn still running or
-- ended within `p_window` seconds), 'failed' (a plain repeat: the same fingerprint, its turn
-- failed or was interrupted within `p_window` seconds; a cancelled one was stopped on purpose,
-- so asking again runs); anything else matches nothing. Its fingerprint comes too
-- (a key reused for another request is refused).
CREATE OR REPLACE FUNCTION crayfish_earlier_request(
    p_route text, p_fingerprint text, p_key text, p_match text, p_window double precision,
    p_now double precision
)
    RETURNS TABLE (task_id text, fingerprint text)
    LANGUAGE sql STABLE
AS $$
    SELECT r.task_id, r.fingerprint FROM turn_requests r
    WHERE p_match = 'key' AND r.route = p_route AND r.idempotency_key = p_key
    UNION ALL
    (SELECT r.task_id, r.fingerprint FROM turn_requests r JOIN tasks t ON t.id = r.task_id
        WHERE p_match IN ('retry', 'failed') AND r.route = p_route
          AND r.fingerprint = p_fingerprint
          AND CASE p_match
              WHEN 'retry' THEN t.status IN ('queued', 'running') OR t.finished_at >= p_now - p_window
              ELSE t.status IN ('failed', 'interrupted')
                  AND t.finished_at >= p_now - p_window
          END
        ORDER BY r.created_at DESC LIMIT 1)
$$;

-- crayfish_submit for a request: under the request's lock (its key or fingerprint), the
-- earlier request it repeats (`earlier`, its turn left alone), or the new task with its request
-- recorded, in one transaction: two attempts arriving together start one turn. The request's
-- lock comes before the session's (crayfish_submit), which nothing holds while taking it.
CREATE OR REPLACE FUNCTION crayfish_submit_request(
    p_route text, p_fingerprint text, p_key text, p_match text, p_window double precision,
    p_id text, p_session text, p_kind text, p_message text, p_created double precision,
    p_images json, p_runner text, p_now double precision, p_trace json
)
    RETURNS TABLE (created boolean, status text, earlier text, earlier_fingerprint text)
    LANGUAGE plpgsql
AS $$
DECLARE
    found_task text;
    found_fingerprint text;
BEGIN
    PERFORM pg_advisory_xact_lock(  -- TURN_REQUEST_LOCK
        72108, hashtext(p_route || ':' || coalesce(p_key, p_fingerprint))
    );
    SELECT e.task_id, e.fingerprint INTO found_task, found_fingerprint
        FROM crayfish_earlier_request(p_route, p_fingerprint, p_key, p_match, p_window, p_now) e
        LIMIT 1;
    IF found_task IS NOT NULL THEN
        RETURN QUERY SELECT false, NULL::text, found_task, found_fingerprint;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT s.created, s.status, NULL::text, NULL::text
        FROM crayfish_submit(
            p_id, p_session, p_kind, p_message, p_created, p_images, p_runner, p_now, p_trace
        ) s;
    INSERT INTO turn_requests (task_id, route, fingerprint, idempotency_key, created_at)
        VALUES (p_id, p_route, p_fingerprint, p_key, p_now)
        ON CONFLICT DO NOTHING;
END;
$$;
