"""Schedules: when they fire, the scheduler that fires them (the users', the model's and the
built-in ones), and HEARTBEAT.md turns."""
