-- Subagents: a child is a turn (a row of `tasks`, kind 'subagent') in a session of its own, spawned
-- by a parent turn. This row ties the two together and records whether the child's end reached
-- the parent (a waiting tool call, or a report turn in the parent's session), so that happens
-- once whichever replica sees the child end, or sweeps it after a crash.
CREATE TABLE subagents (
    child_id text PRIMARY KEY,
    parent_id text NOT NULL,
    parent_session text NOT NULL,
    child_session text NOT NULL,
    -- the session whose sandbox its tools use: its parent's (a child's child: the same)
    sandbox_session text NOT NULL,
    label text NOT NULL DEFAULT '',
    depth integer NOT NULL,
    timeout_s double precision NOT NULL,
    created_at double precision NOT NULL,
    -- a tool call of the parent waits for it: its end is told there, not by a report turn
    waited boolean NOT NULL DEFAULT false,
    -- when its end reached the parent (NULL: not yet)
    reported_at double precision,
    -- messages the parent sent it while it runs (`subagents` action steer), read between rounds
    steering jsonb NOT NULL DEFAULT '[]'
);
CREATE INDEX subagents_parent ON subagents (parent_id);
CREATE INDEX subagents_parent_session ON subagents (parent_session);
CREATE INDEX subagents_unreported ON subagents (created_at) WHERE reported_at IS NULL;
