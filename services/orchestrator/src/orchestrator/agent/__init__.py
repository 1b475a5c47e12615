"""The agent: prompt builder, LLM client and tool loop (no HTTP here)."""
