-- A session's summary, made when it has been idle (consolidation/idle.py): what memory
-- consolidation reads, and what compaction reuses instead of asking the model again. One per
-- session, replaced by a newer one; `through_seq` is the last record it covers and `messages` the
-- effective messages it stands for (a prefix of the history while no compaction came after it).
CREATE TABLE session_summaries (
    session_id text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    summary text NOT NULL,
    through_seq bigint NOT NULL,
    messages integer NOT NULL,
    made_at double precision NOT NULL
);
CREATE INDEX session_summaries_made_at ON session_summaries (made_at);

-- Each consolidation run (consolidation/runs.py): its turn, and the summaries it read (those made
-- after `since` up to `until`, NULL until it has read them). The next run reads from the `until`
-- of the last completed one.
CREATE TABLE memory_consolidations (
    task_id text PRIMARY KEY,
    since double precision NOT NULL,
    until double precision,
    summaries integer NOT NULL DEFAULT 0,
    created_at double precision NOT NULL
);
