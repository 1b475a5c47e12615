"""Email: a mailbox read over IMAP (aioimaplib) and answered over SMTP (aiosmtplib)."""

from __future__ import annotations

from channels.config import ChannelsSettings
from channels.contract import Channel


def factory(settings: ChannelsSettings) -> Channel | None:
    """The `crayfish.channels` entry point: the channel when CHANNELS_EMAIL_IMAP_HOST is set
    (its SDK is imported only then: some take seconds to import)."""
    if not settings.email_imap_host:
        return None
    from channels.email.channel import EmailChannel

    return EmailChannel(settings)
