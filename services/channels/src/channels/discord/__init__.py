"""The Discord channel: REST through discord.py's HTTPClient, the gateway read here."""
