"""`crayfish`: a command-line client of the orchestrator's REST API."""

from crayfish_cli.main import main

__all__ = ["main"]
