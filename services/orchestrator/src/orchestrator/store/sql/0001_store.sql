-- Sessions, their history, tasks (runs) and their events: the orchestrator's store of record.

CREATE TABLE sessions (
    id text PRIMARY KEY,
    title text NOT NULL DEFAULT '',
    -- messages in the effective history (after compactions), kept so listing reads no history
    message_count integer NOT NULL DEFAULT 0,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);
CREATE INDEX sessions_updated_at ON sessions (updated_at DESC);

-- One row per message or compaction, appended in whole groups (one transaction per group).
-- `json`, not `jsonb`: kept as written (key order, \u0000 in tool output).
CREATE TABLE session_records (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    kind text NOT NULL CHECK (kind IN ('message', 'compaction')),
    body json NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE tasks (
    id text PRIMARY KEY,
    session_id text NOT NULL,
    kind text NOT NULL,
    message text NOT NULL,
    status text NOT NULL CHECK (
        status IN ('queued', 'running', 'completed', 'failed', 'cancelled', 'interrupted')
    ),
    result text,
    error text,
    delivered boolean NOT NULL DEFAULT true,
    usage jsonb NOT NULL DEFAULT '{"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}',
    -- true once the message is in the session's history: from then on a turn may have had side
    -- effects (LLM calls, tools), so it is never run again by itself
    accepted boolean NOT NULL DEFAULT false,
    job_id bigint,
    -- the replica that started it (host:port:pid)
    runner text,
    created_at double precision NOT NULL,
    started_at double precision,
    finished_at double precision
);
CREATE INDEX tasks_active ON tasks (session_id) WHERE status IN ('queued', 'running');
CREATE INDEX tasks_created_at ON tasks (created_at);

-- Events of every task. `id` orders the global stream, `seq` a task's own stream (1, 2, ...);
-- both are what SSE clients send back as Last-Event-ID.
CREATE SEQUENCE events_id_seq;
CREATE TABLE events (
    id bigint PRIMARY KEY,
    task_id text NOT NULL,
    seq integer NOT NULL,
    type text NOT NULL,
    data json NOT NULL,
    ts double precision NOT NULL,
    UNIQUE (task_id, seq)
);

-- Appends one event and wakes every replica's readers. Ids are taken under one lock held to the
-- end of the transaction, so they become visible in order: a reader that has seen id N never
-- finds a smaller id later. Unless `p_durable` (a task's terminal event, written with its final
-- state), the commit does not wait for the disk, which keeps the lock short: events are a
-- progress report, the history and a task's outcome are written with synchronous commits.
CREATE FUNCTION crayfish_add_event(
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
    PERFORM pg_advisory_xact_lock(7210481);
    new_id := nextval('events_id_seq');
    SELECT coalesce(max(e.seq), 0) + 1 INTO new_seq FROM events e WHERE e.task_id = p_task_id;
    INSERT INTO events (id, task_id, seq, type, data, ts)
        VALUES (new_id, p_task_id, new_seq, p_type, p_data, p_ts);
    PERFORM pg_notify('crayfish_events', p_task_id);
    RETURN QUERY SELECT new_id, new_seq;
END;
$$;

-- Schedules that fire once across replicas: whoever moves `due_at` on runs it.
CREATE TABLE schedules (
    name text PRIMARY KEY,
    due_at double precision NOT NULL
);

-- JSONL sessions (the store before PostgreSQL) already imported, by file name.
CREATE TABLE legacy_imports (
    name text PRIMARY KEY,
    imported_at double precision NOT NULL
);
