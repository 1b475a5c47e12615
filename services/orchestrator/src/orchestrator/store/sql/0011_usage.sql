-- Every LLM request (its retries included), answered or failed: who asked (session, task,
-- kind), the preset asked for and the model that served it, tokens, latency and price (USD,
-- NULL without a price table). Budgets sum these rows, so every replica sees the same spend.
CREATE TABLE llm_requests (
    id bigserial PRIMARY KEY,
    at double precision NOT NULL,
    session_id text NOT NULL DEFAULT '',
    task_id text NOT NULL DEFAULT '',
    kind text NOT NULL,
    preset text NOT NULL,
    model text NOT NULL,
    prompt_tokens integer NOT NULL DEFAULT 0,
    completion_tokens integer NOT NULL DEFAULT 0,
    cached_tokens integer NOT NULL DEFAULT 0,
    latency_ms double precision NOT NULL DEFAULT 0,
    price double precision,
    error text NOT NULL DEFAULT ''
);
CREATE INDEX llm_requests_at ON llm_requests (at);
CREATE INDEX llm_requests_task ON llm_requests (task_id) WHERE task_id <> '';

-- The workspace's daily caps (NULL: none), edited over REST and read at every turn: all turns
-- together, and background turns (heartbeats, schedules) alone.
CREATE TABLE usage_budget (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    daily_tokens bigint,
    daily_usd double precision,
    background_daily_tokens bigint,
    background_daily_usd double precision,
    updated_at double precision NOT NULL
);

-- A cap passed on a day, once: its notification is sent by the replica that inserts the row.
CREATE TABLE usage_alerts (
    day text NOT NULL,
    cap text NOT NULL,
    at double precision NOT NULL,
    PRIMARY KEY (day, cap)
);
