"""Subagents: child turns a turn spawns in their own sessions, their limits, and their ends
told to the parent's session."""
