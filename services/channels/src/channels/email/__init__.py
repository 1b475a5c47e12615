"""Email: a mailbox read over IMAP (aioimaplib) and answered over SMTP (aiosmtplib)."""
