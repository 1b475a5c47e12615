"""Exec approvals: the policy, shell parsing, and turns paused for a person's answer."""
