-- The orchestrator's own schedules (the HEARTBEAT.md turn, event retention) are rows of
-- scheduled_turns marked `builtin`, fired by the one scheduler with the one claim (a firing moves
-- `next_run` only if it still holds the value read); the claims table they had beside it goes.
-- Neither the REST API nor the model's tools see or count these rows. Their rhythm carries over:
-- each starting replica sets the interval from its settings (store/schedules.py, plant).

ALTER TABLE scheduled_turns ADD COLUMN builtin boolean NOT NULL DEFAULT false;

INSERT INTO scheduled_turns (id, session_id, message, kind, next_run, created_at, builtin)
    SELECT name, '', '', 'every', due_at, due_at, true FROM schedules
    WHERE name IN ('heartbeat', 'events-retention')
    ON CONFLICT (id) DO NOTHING;

DROP TABLE schedules;
