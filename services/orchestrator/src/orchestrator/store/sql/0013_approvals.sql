-- The exec policy of each workspace (approvals/policy.py), as its REST API shows it; a
-- workspace without a row has the CRAYFISH_APPROVAL_POLICY default.
CREATE TABLE exec_policies (
    workspace text PRIMARY KEY,
    policy json NOT NULL,
    updated_at double precision NOT NULL
);

-- Commands waiting for a person (or answered): a turn whose exec needs an approval waits on its
-- row, which any replica may answer. `status`: pending, allowed, denied, expired (no answer in
-- time: the policy's fallback was applied).
CREATE TABLE approvals (
    id text PRIMARY KEY,
    task_id text NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    session_id text NOT NULL,
    call_id text NOT NULL,
    command text NOT NULL,
    workdir text NOT NULL,
    programs json NOT NULL,
    missing json NOT NULL,
    reason text NOT NULL,
    status text NOT NULL DEFAULT 'pending',
    decision text,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    decided_at double precision
);
CREATE INDEX approvals_pending ON approvals (created_at) WHERE status = 'pending';
CREATE INDEX approvals_task ON approvals (task_id);
