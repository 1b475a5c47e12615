"""Crayfish orchestrator: REST API, prompt builder and tool loop."""
