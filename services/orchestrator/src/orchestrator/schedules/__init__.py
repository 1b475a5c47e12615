"""Schedules: when they fire, the scheduler that fires them, and HEARTBEAT.md turns."""
