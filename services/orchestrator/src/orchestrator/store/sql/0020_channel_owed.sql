-- Each owed reply gets a number from the counter of channel_messages' ids, so that one cursor
-- says what a channel was told of both: its long poll (GET /api/channels/{channel}/owed?after=)
-- answers at once when anything owed is newer than that.
ALTER TABLE channel_replies
    ADD COLUMN seq bigint NOT NULL DEFAULT nextval('channel_messages_id_seq');
