-- A turn runs once: what made a failed turn fail (so every replica answers it alike), and the
-- HTTP requests that started turns (so a client's retry of one, on any replica, is answered
-- with that turn's outcome instead of running it again).

-- {"cause", "llm_status", "llm_code", "tools_ran"} of a failed turn (orchestrator/turns/turn_failure.py)
ALTER TABLE tasks ADD COLUMN failure jsonb;

-- One row per request that started a turn. `fingerprint` is a hash of the route, the named
-- session and the request's body; `idempotency_key` the client's Idempotency-Key, if it sent
-- one. Rows go with their task, or after a day (the retention loop).
CREATE TABLE turn_requests (
    task_id text PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    route text NOT NULL,
    fingerprint text NOT NULL,
    idempotency_key text,
    created_at double precision NOT NULL
);
CREATE UNIQUE INDEX turn_requests_key ON turn_requests (route, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX turn_requests_fingerprint ON turn_requests (route, fingerprint, created_at);
CREATE INDEX turn_requests_created ON turn_requests (created_at);

-- The earlier request a new one repeats, by `p_match`: 'key' (the same Idempotency-Key, at any
-- time), 'retry' (a client's declared retry: the same fingerprint, its turn still running or
-- ended within `p_window` seconds), 'failed' (a plain repeat: the same fingerprint, its turn
-- failed or was interrupted within `p_window` seconds; a cancelled one was stopped on purpose,
-- so asking again runs); anything else matches nothing. Its fingerprint comes too
-- (a key reused for another request is refused).
CREATE FUNCTION crayfish_earlier_request(
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

-- crayfish_submit for a request: under the request's lock (72108, its key or fingerprint), the
-- earlier request it repeats (`earlier`, its turn left alone), or the new task with its request
-- recorded, in one transaction: two attempts arriving together start one turn. The request's
-- lock comes before the session's (crayfish_submit), which nothing holds while taking it.
CREATE FUNCTION crayfish_submit_request(
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
    PERFORM pg_advisory_xact_lock(72108, hashtext(p_route || ':' || coalesce(p_key, p_fingerprint)));
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
