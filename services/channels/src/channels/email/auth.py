"""Whether a mail's From: can be believed: the receiving server's Authentication-Results
(RFC 8601) must say dmarc=pass for the From: domain. Only the header with our server's
authserv-id counts, and only the topmost one: anything below it a sender could have written."""

from __future__ import annotations

import re
from email.message import EmailMessage

DMARC = re.compile(r"\bdmarc\s*=\s*(\w+)", re.I)
HEADER_FROM = re.compile(r"\bheader\.from\s*=\s*([^\s;]+)", re.I)


def verified(message: EmailMessage, address: str, authserv_id: str) -> bool:
    """True when our server checked the From: domain with DMARC and it passed."""
    domain = address.rpartition("@")[2].lower()
    for header in message.get_all("Authentication-Results", []):
        serv, _, results = str(header).partition(";")
        if serv.strip().lower().split()[:1] != [authserv_id.lower()]:
            continue  # another server's verdict, or one a sender wrote
        verdict = DMARC.search(results)
        checked = HEADER_FROM.search(results)
        if verdict is None or verdict[1].lower() != "pass":
            return False
        return checked is None or checked[1].lower().strip(".") == domain
    return False
