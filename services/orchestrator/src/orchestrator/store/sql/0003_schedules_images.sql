-- Schedules of turns (POST /api/schedules, the model's schedule_* tools) and the images a
-- task's message carries (references to files under the workspace's media/).

CREATE TABLE scheduled_turns (
    id text PRIMARY KEY,
    -- the session its turns run in (`schedule-<id>` when none was given)
    session_id text NOT NULL,
    message text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('at', 'every', 'cron')),
    at_time double precision,
    every_seconds double precision,
    cron text,
    timezone text,
    -- the session whose model made it (its tools are bounded per session); NULL: the API
    created_in text,
    -- when it fires next; a firing moves it on (or deletes an `at` schedule) with a check that
    -- it still holds the value read, so one replica fires each due time
    next_run double precision NOT NULL,
    last_run double precision,
    last_task_id text,
    runs integer NOT NULL DEFAULT 0,
    created_at double precision NOT NULL
);
CREATE INDEX scheduled_turns_next_run ON scheduled_turns (next_run);
CREATE INDEX scheduled_turns_created_in ON scheduled_turns (created_in) WHERE created_in IS NOT NULL;

ALTER TABLE tasks ADD COLUMN images json NOT NULL DEFAULT '[]';
