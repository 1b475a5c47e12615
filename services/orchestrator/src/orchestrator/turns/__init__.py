"""Turns: the manager, the worker that runs them, their live events and failures."""
