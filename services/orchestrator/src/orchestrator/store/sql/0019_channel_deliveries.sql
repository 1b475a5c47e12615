-- Where a schedule's turns deliver their answers: a channel chat (`channel:chat_id`), set when
-- the schedule was made from a chat (or named); NULL: nowhere but the session.
ALTER TABLE scheduled_turns ADD COLUMN deliver_to text;

-- Messages a channel owes a chat that no turn of the chat asked for (a `notify` to a
-- `channel:chat_id` target): kept until the channels service says it delivered them or gave
-- up, like channel_replies. `status`: pending, delivered, failed.
CREATE TABLE channel_messages (
    id bigserial PRIMARY KEY,
    channel text NOT NULL,
    chat_id text NOT NULL,
    text text NOT NULL,
    status text NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'delivered', 'failed')),
    error text NOT NULL DEFAULT '',
    created_at double precision NOT NULL,
    settled_at double precision
);
CREATE INDEX channel_messages_pending ON channel_messages (channel, id) WHERE status = 'pending';
