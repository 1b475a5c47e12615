"""Background processes: exec's `background`/`yield_ms`, the process tool, their records."""
