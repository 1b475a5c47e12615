"""The sessions' background processes as the orchestrator sees them: wake-ups and kills."""
