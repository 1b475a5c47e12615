-- A running turn's events in one statement: its outbox writes a batch with one round trip and
-- one notification (instead of a transaction, a statement and a notification per event).
-- Same rules as crayfish_add_event: ids in commit order (the one lock), seq per task, and not
-- durable on their own (the turn's terminal event, written with its outcome, is). The data
-- come as json[], so the server never parses inside them (json accepts \u0000, which its
-- operators refuse, and a tool's output may hold it).

CREATE FUNCTION crayfish_add_events(
    p_task_id text, p_types text[], p_datas json[], p_tss double precision[]
)
    RETURNS void
    LANGUAGE plpgsql
AS $$
DECLARE
    last_seq integer;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM pg_advisory_xact_lock(7210481);
    SELECT coalesce(max(e.seq), 0) INTO last_seq FROM events e WHERE e.task_id = p_task_id;
    INSERT INTO events (id, task_id, seq, type, data, ts)
        SELECT nextval('events_id_seq'), p_task_id, last_seq + item.n, item.type, item.data,
               item.ts
        FROM unnest(p_types, p_datas, p_tss) WITH ORDINALITY AS item(type, data, ts, n)
        ORDER BY item.n;
    PERFORM pg_notify('crayfish_events', p_task_id);
END;
$$;
