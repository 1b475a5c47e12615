"""Crayfish as an MCP server: `chat` and `memory_search` for MCP clients (Claude Desktop,
Cursor, ...), over streamable HTTP at /mcp (in the orchestrator) or stdio (`crayfish mcp serve`)."""
