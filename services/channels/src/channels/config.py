"""Settings of the channels service, read from `CHANNELS_*` environment variables."""

from __future__ import annotations

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DM_POLICIES = ("pairing", "allowlist", "open", "disabled")


class ChannelsSettings(BaseSettings):
    """Where the orchestrator is, this service's own port, limits, and each channel's settings
    (`CHANNELS_<NAME>_…`); a channel runs when its token is set."""

    model_config = SettingsConfigDict(env_prefix="CHANNELS_", extra="ignore")

    # The orchestrator's REST API (its public address, as any client's).
    orchestrator_url: str = "http://127.0.0.1:8080"
    # The orchestrator's CRAYFISH_CHANNELS_TOKEN: this service's own bearer token.
    api_token: str = Field("", repr=False)
    # /healthz and /readyz (each channel's state) listen here.
    http_host: str = "127.0.0.1"
    # The port of /healthz and /readyz.
    http_port: int = 8091
    # DEBUG, INFO, WARNING or ERROR.
    log_level: str = "INFO"
    # One JSON object per log line (for containers) instead of text.
    log_json: bool = False
    # Seconds any one call to a platform or the orchestrator may take (a long poll: its own
    # wait on top); past it the call is dropped and retried later.
    call_timeout: float = Field(15.0, gt=0)
    # Attempts at delivering one reply (a platform's 429 retry_after is waited out between
    # them) before it counts as failed, which the task's reply shows.
    reply_attempts: int = Field(8, ge=1)
    # Seconds between edits of a streamed answer (Telegram allows about one a second per chat).
    stream_every: float = Field(1.0, ge=0)
    # How often replies owed from before a restart are looked for.
    drain_every: float = Field(30.0, gt=0)
    # A channel whose loop fails is restarted after a backoff doubling up to this many seconds.
    backoff_max: float = Field(60.0, gt=0)

    # --- Telegram (a Bot API token from @BotFather) ---
    # The bot's token; empty: the Telegram channel is off.
    telegram_token: str = Field("", repr=False)
    # The Bot API server; requests go to {API_URL}/bot{token}/{method}.
    telegram_api_url: str = "https://api.telegram.org"
    # Who may talk in direct messages: pairing (the owner approves a code), allowlist, open
    # (needs CHANNELS_TELEGRAM_ALLOW_FROM=*) or disabled.
    telegram_dm_policy: str = "pairing"
    # User ids (or @usernames) who may talk without pairing, comma-separated; `*`: anyone.
    telegram_allow_from: str = ""
    # Group chat ids where the bot answers every message, not only when mentioned or replied to.
    telegram_open_groups: str = ""
    # Seconds a getUpdates long poll waits for a message.
    telegram_poll_timeout: int = Field(25, ge=0, le=50)

    # --- Slack (an app with Socket Mode on: a bot token and an app-level token) ---
    # The bot's token (xoxb-…); with CHANNELS_SLACK_APP_TOKEN set, the Slack channel runs.
    slack_bot_token: str = Field("", repr=False)
    # The app-level token (xapp-…, scope connections:write) that opens the Socket Mode link.
    slack_app_token: str = Field("", repr=False)
    # The Web API; methods are {API_URL}/{method}, apps.connections.open gives the WebSocket.
    slack_api_url: str = "https://slack.com/api/"
    # Who may talk in direct messages: pairing, allowlist, open (ALLOW_FROM=*) or disabled.
    slack_dm_policy: str = "pairing"
    # Slack user ids (U…) who may talk without pairing, comma-separated; `*`: anyone.
    slack_allow_from: str = ""
    # Channel ids (C…) where the bot answers every message, not only when mentioned.
    slack_open_groups: str = ""

    # --- Matrix (a bot account's access token, e.g. from /login or Element's settings) ---
    # The bot account's access token; empty: the Matrix channel is off.
    matrix_access_token: str = Field("", repr=False)
    # The homeserver's client-server API base URL (requests go to {URL}/_matrix/client/v3/…).
    matrix_homeserver: str = "https://matrix.org"
    # Who may talk in direct rooms (a room of the bot and one person): pairing, allowlist,
    # open (needs CHANNELS_MATRIX_ALLOW_FROM=*) or disabled.
    matrix_dm_policy: str = "pairing"
    # Full user ids (@name:server) who may talk without pairing, comma-separated; `*`: anyone.
    matrix_allow_from: str = ""
    # Room ids as chat ids (see README) where the bot answers every message, not only when
    # mentioned or replied to.
    matrix_open_groups: str = ""
    # Seconds a /sync long poll waits for events.
    matrix_poll_timeout: int = Field(25, ge=0, le=50)
    # Where the bot keeps its end-to-end keys (its device's olm account, sessions, the devices
    # it trusts), made readable by this user only; losing it makes the device unusable.
    matrix_store_dir: str = "~/.crayfish/channels/matrix"

    # --- Discord (a bot token from the Developer Portal; enable the Message Content intent) ---
    # The bot's token; empty: the Discord channel is off.
    discord_token: str = Field("", repr=False)
    # Discord's REST API; the gateway's address comes from its GET /gateway/bot.
    discord_api_url: str = "https://discord.com/api/v10"
    # Who may talk in direct messages: pairing, allowlist, open (ALLOW_FROM=*) or disabled.
    discord_dm_policy: str = "pairing"
    # User ids (or usernames) who may talk without pairing, comma-separated; `*`: anyone.
    discord_allow_from: str = ""
    # Channel ids where the bot answers every message, not only when mentioned or replied to.
    discord_open_groups: str = ""
    # Where the gateway session and the last message handled are kept, so that after a crash
    # the session is resumed and Discord sends again what was not yet queued.
    discord_state_file: str = "~/.crayfish/channels/discord-session.json"

    # --- Email (a mailbox read over IMAP, answered over SMTP) ---
    # The IMAP server of the assistant's mailbox; empty: the email channel is off.
    email_imap_host: str = ""
    # Its port (993: implicit TLS).
    email_imap_port: int = 993
    # tls (implicit, port 993) or none (loopback tests only).
    email_imap_security: str = "tls"
    # The SMTP server replies are sent through.
    email_smtp_host: str = ""
    # Its port (587: submission with STARTTLS).
    email_smtp_port: int = 587
    # starttls, tls (implicit, port 465) or none (loopback tests only).
    email_smtp_security: str = "starttls"
    # The mailbox's login, for IMAP and SMTP.
    email_username: str = ""
    # The mailbox's password (or app password).
    email_password: str = Field("", repr=False)
    # The assistant's own address (replies' From:); empty: the username.
    email_address: str = ""
    # Seconds between looks for unseen mail in INBOX, when the server does not offer IDLE.
    email_poll_every: float = Field(30.0, gt=0)
    # With IDLE: seconds one IDLE waits before it is ended and re-issued (RFC 2177: before the
    # server's 30 minutes), which also checks the server still answers.
    email_idle_every: float = Field(1500.0, gt=0, le=1740)
    # Who may write in: pairing, allowlist, open (needs CHANNELS_EMAIL_ALLOW_FROM=*) or disabled.
    email_dm_policy: str = "pairing"
    # Sender addresses who may write without pairing, comma-separated; `*`: anyone.
    email_allow_from: str = ""
    # A From: is believed only when the receiving server's Authentication-Results header says
    # dmarc=pass for its domain (a forged From: is ignored); false trusts From: as written.
    email_verify_sender: bool = True
    # The authserv-id of the receiving server's Authentication-Results (its host name, as it
    # writes it); only that server's verdict counts. Empty: the IMAP host.
    email_authserv_id: str = ""

    # --- QQ (OneBot v11 as NapCat serves it: its forward WebSocket server) ---
    # NapCat's forward WebSocket, e.g. ws://127.0.0.1:3001; empty: the QQ channel is off.
    qq_url: str = ""
    # The WebSocket server's token in NapCat (sent as `Authorization: Bearer …`).
    qq_access_token: str = Field("", repr=False)
    # Who may talk in private chats: pairing, allowlist, open (with ALLOW_FROM=*) or disabled.
    qq_dm_policy: str = "pairing"
    # QQ numbers who may talk without pairing, comma-separated; `*`: anyone.
    qq_allow_from: str = ""
    # Group numbers where the bot answers every message, not only when @-mentioned or replied to.
    qq_open_groups: str = ""

    # --- Feishu/Lark (a custom app with a bot; events through the long connection) ---
    # The app's id (cli_…); empty: the Feishu channel is off.
    feishu_app_id: str = ""
    # The app's secret.
    feishu_app_secret: str = Field("", repr=False)
    # https://open.feishu.cn, or https://open.larksuite.com for Lark.
    feishu_domain: str = "https://open.feishu.cn"
    # Who may talk in direct messages: pairing, allowlist, open (with ALLOW_FROM=*) or disabled.
    feishu_dm_policy: str = "pairing"
    # open_ids who may talk without pairing, comma-separated; `*`: anyone.
    feishu_allow_from: str = ""
    # Group chat ids (oc_…) where the bot answers every message, not only when @-mentioned.
    feishu_open_groups: str = ""

    @field_validator(
        "telegram_dm_policy",
        "slack_dm_policy",
        "matrix_dm_policy",
        "discord_dm_policy",
        "email_dm_policy",
        "qq_dm_policy",
        "feishu_dm_policy",
    )
    @classmethod
    def _check_dm_policy(cls, value: str) -> str:
        if value not in DM_POLICIES:
            raise ValueError(f"must be one of {', '.join(DM_POLICIES)}")
        return value


def id_list(text: str) -> frozenset[str]:
    """A comma-separated setting as a set of its non-empty items."""
    return frozenset(item.strip() for item in text.split(",") if item.strip())
