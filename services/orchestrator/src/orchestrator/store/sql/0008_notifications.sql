-- Notifications the model sent (the `notify` tool), kept to bound them per turn and per hour and
-- to deliver them to webhooks in batches: each webhook's cursor says up to which one it has them.

CREATE TABLE notifications (
    seq bigserial PRIMARY KEY,
    id text NOT NULL UNIQUE,
    -- the turn that sent it (its task id), or the session when no turn of it ran
    turn_id text NOT NULL,
    created_at double precision NOT NULL,
    note json NOT NULL
);
CREATE INDEX notifications_turn ON notifications (turn_id);
CREATE INDEX notifications_created_at ON notifications (created_at);

-- One row per webhook (by fingerprint): the last notification delivered to it, and when.
CREATE TABLE webhook_cursors (
    fingerprint text PRIMARY KEY,
    seq bigint NOT NULL,
    sent_at double precision NOT NULL
);
