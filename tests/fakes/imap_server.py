"""A mailbox served over IMAP4rev1 on loopback, for what the email channel sends: CAPABILITY,
LOGIN, SELECT, UID SEARCH UNSEEN, UID FETCH BODY.PEEK[], UID STORE +FLAGS (\\Seen), NOOP,
LOGOUT (RFC 3501's wire format: tagged commands, untagged data, literals `{n}`). Anything else
is answered BAD. It counts how often each mail was fetched, and can hold STOREs unanswered
(lost: a crash between queueing a turn and flagging its mail)."""

from __future__ import annotations

import re
import socketserver
import threading
import time
from dataclasses import dataclass, field

COMMAND = re.compile(r"^(\S+) (UID )?(\w+)\s*(.*)$", re.I)


@dataclass
class Stored:
    uid: int
    raw: bytes
    flags: set[str] = field(default_factory=set)
    fetched: int = 0


class FakeIMAP:
    def __init__(self, username: str = "bot@crayfish.test", password: str = "secret"):
        self.username, self.password = username, password
        self.mails: list[Stored] = []
        self.lock = threading.Condition()
        self.hold_stores = False
        self.logins = 0
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def deliver(self, raw: bytes) -> int:
        """A mail arrives in INBOX, unseen; its UID."""
        with self.lock:
            uid = len(self.mails) + 1
            self.mails.append(Stored(uid, raw))
            return uid

    def fetched(self, uid: int) -> int:
        with self.lock:
            return self.mails[uid - 1].fetched

    def seen(self, uid: int) -> bool:
        with self.lock:
            return "\\Seen" in self.mails[uid - 1].flags

    def _handler(self) -> type[socketserver.StreamRequestHandler]:
        fake = self

        class Session(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                self.wfile.write(b"* OK [CAPABILITY IMAP4rev1] fake mailbox ready\r\n")
                for line in self.rfile:
                    match = COMMAND.match(line.decode(errors="replace").rstrip("\r\n"))
                    if match is None:
                        self.wfile.write(b"* BAD no tag\r\n")
                        continue
                    tag, uid, name, args = match.groups()
                    if not fake._answer(self.wfile, tag, bool(uid), name.upper(), args):
                        return

        return Session

    def _answer(self, out, tag: str, by_uid: bool, name: str, args: str) -> bool:  # type: ignore[no-untyped-def]
        def ok(text: str = "done") -> None:
            out.write(f"{tag} OK {name} {text}\r\n".encode())

        if name == "CAPABILITY":
            out.write(b"* CAPABILITY IMAP4rev1 UIDPLUS\r\n")
            ok()
        elif name == "LOGIN":
            user, _, password = args.partition(" ")
            if user.strip('"') == self.username and password.strip('"') == self.password:
                self.logins += 1
                ok()
            else:
                out.write(f"{tag} NO [AUTHENTICATIONFAILED] wrong login\r\n".encode())
        elif name == "SELECT" and args.strip('"').upper() == "INBOX":
            with self.lock:
                out.write(f"* {len(self.mails)} EXISTS\r\n* 0 RECENT\r\n".encode())
                out.write(b"* OK [UIDVALIDITY 7] ok\r\n")
                out.write(f"* OK [UIDNEXT {len(self.mails) + 1}] ok\r\n".encode())
            out.write(b"* FLAGS (\\Seen \\Answered)\r\n")
            ok("[READ-WRITE] selected")
        elif name == "SEARCH" and by_uid and args.upper() == "UNSEEN":
            with self.lock:
                unseen = [str(m.uid) for m in self.mails if "\\Seen" not in m.flags]
            out.write(("* SEARCH " + " ".join(unseen)).rstrip().encode() + b"\r\n")
            ok()
        elif name == "FETCH" and by_uid and args.upper().endswith("BODY.PEEK[]"):
            mail = self._mail(args)
            if mail is not None:
                with self.lock:
                    mail.fetched += 1
                head = f"* {mail.uid} FETCH (UID {mail.uid} BODY[] {{{len(mail.raw)}}}\r\n"
                out.write(head.encode() + mail.raw + b")\r\n")
            ok()
        elif name == "STORE" and by_uid and "+FLAGS" in args.upper():
            with self.lock:  # a held STORE is lost: never answered, never applied
                if self.hold_stores:
                    self.lock.wait_for(lambda: not self.hold_stores)
                    return False
            mail = self._mail(args)
            if mail is not None:
                with self.lock:
                    mail.flags.add("\\Seen")
                out.write(f"* {mail.uid} FETCH (UID {mail.uid} FLAGS (\\Seen))\r\n".encode())
            ok()
        elif name == "NOOP":
            ok()
        elif name == "LOGOUT":
            out.write(b"* BYE see you\r\n")
            ok()
            return False
        else:
            out.write(f"{tag} BAD not understood\r\n".encode())
        return True

    def _mail(self, args: str) -> Stored | None:
        uid = int(args.split()[0])
        with self.lock:
            return self.mails[uid - 1] if 0 < uid <= len(self.mails) else None

    def wait_for(self, check, timeout: float = 30.0):  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = check()
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError("timed out")

    def __enter__(self) -> FakeIMAP:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.hold_stores = False
            self.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()
