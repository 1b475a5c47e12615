"""Crayfish's chat channels: Telegram and the interface later platforms plug into."""
