-- What a client of the OpenAI-compatible API asked of a turn (its instructions, sampling
-- parameters, tools and tool results), written before the turn is queued so whichever replica
-- runs it reads it; and what the turn answered that the task row does not hold (the calls of
-- the client's tools, the provider's refusal).
CREATE TABLE openai_turns (
    task_id text PRIMARY KEY,
    request json NOT NULL,
    answer json,
    created_at double precision NOT NULL
);

-- Each /v1 session's conversation as its client holds it, as a digest of its messages
-- (api/conversation.py): a request whose messages extend it continues the session, whichever
-- replica it reaches.
CREATE TABLE openai_conversations (
    session_id text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    digest text NOT NULL,
    updated_at double precision NOT NULL
);
CREATE INDEX openai_conversations_digest ON openai_conversations (digest);
