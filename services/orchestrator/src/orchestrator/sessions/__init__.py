"""Conversation sessions: durable history and one run at a time per session."""
