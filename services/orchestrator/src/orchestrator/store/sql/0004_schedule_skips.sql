-- Firings a schedule skipped because its previous turn was still queued or running.

ALTER TABLE scheduled_turns ADD COLUMN skipped integer NOT NULL DEFAULT 0;
