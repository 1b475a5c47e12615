"""Crayfish connectors: the one service that reaches outside (MCP servers, web_fetch)."""
