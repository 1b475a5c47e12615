"""Every PostgreSQL advisory-lock id the orchestrator takes, each with what it keeps in order.

The SQL functions in store/sql/functions.sql hold some of these as literals, each followed by a
comment naming its constant here (test_migrations.py checks the two agree). The one-key form
(pg_advisory_xact_lock(bigint)) and the two-key form (int, int) are separate lock spaces.
"""

MIGRATION_LOCK = 72103  # one key: replicas starting together migrate once
SESSION_LOCK = 72104  # with hashtext(session id): a session's submit, claim and delete in turn
SWEEP_LOCK = 72105  # one key, session-level: one replica at a time sweeps silent runners' tasks
SCHEDULE_LIMIT_LOCK = 72106  # one key: the model's schedules are counted and added one at a time
NOTIFY_LIMIT_LOCK = 72107  # one key: notifications are counted and added one at a time
TURN_REQUEST_LOCK = 72108  # with hashtext(route:key-or-fingerprint): one turn per repeated request
EVENTS_LOCK = 7210481  # one key, to the commit: event ids become visible in the order taken
SUBAGENT_LIMIT_LOCK = 72115  # one key: children counted and spawned one at a time
