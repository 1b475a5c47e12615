-- Who may talk to the assistant from a chat channel (channels service): a sender is paired once
-- the owner approves its short code. `status`: pending (a code waits, until expires_at) or
-- approved. One row per sender of a channel.
CREATE TABLE channel_pairings (
    channel text NOT NULL,
    sender_id text NOT NULL,
    sender_name text NOT NULL DEFAULT '',
    code text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'approved')),
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    approved_at double precision,
    PRIMARY KEY (channel, sender_id)
);
CREATE INDEX channel_pairings_code ON channel_pairings (code) WHERE status = 'pending';

-- The answer of a channel's turn, owed to its chat until the channel says it was delivered (or
-- failed for good): the channels service's outbox survives its restarts. `status`: pending,
-- delivered, failed.
CREATE TABLE channel_replies (
    task_id text PRIMARY KEY REFERENCES tasks (id) ON DELETE CASCADE,
    channel text NOT NULL,
    chat_id text NOT NULL,
    status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'delivered', 'failed')),
    error text NOT NULL DEFAULT '',
    created_at double precision NOT NULL,
    settled_at double precision
);
CREATE INDEX channel_replies_pending ON channel_replies (channel, created_at)
    WHERE status = 'pending';
