"""The Telegram channel: the Bot API through python-telegram-bot."""
