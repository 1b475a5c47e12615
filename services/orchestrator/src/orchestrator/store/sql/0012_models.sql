-- Model presets (agent/presets.py): the one a session uses (NULL: the default), and the one a
-- request asked for its turn, written before the turn is queued so whichever replica runs it
-- reads it (only when a request names one).
ALTER TABLE sessions ADD COLUMN model text;

CREATE TABLE turn_models (
    task_id text PRIMARY KEY,
    model text NOT NULL,
    created_at double precision NOT NULL
);
