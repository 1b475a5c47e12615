"""A mailbox served over IMAP4rev1 on loopback, for what the email channel sends: CAPABILITY,
LOGIN, SELECT, UID SEARCH UNSEEN, UID FETCH BODY.PEEK[], UID STORE +FLAGS (\\Seen), NOOP,
IDLE (RFC 2177: `+ idling`, `* n EXISTS` as mail arrives, ended by DONE; offered unless
`idle=False`), LOGOUT (RFC 3501's wire format: tagged commands, untagged data, literals `{n}`).
Anything else is answered BAD. It counts how often each mail was fetched and how many IDLEs
began, can hold STOREs unanswered (`hold_acks`; lost: a crash between queueing a turn and
flagging its mail), and can stop answering on the connections open now (`freeze`), as a
server that hangs does, or close them (`drop`), as one that restarts does."""

from __future__ import annotations

import re
import socket
import socketserver
import threading
from dataclasses import dataclass, field

from tests.fakes.platform_base import FakePlatform

COMMAND = re.compile(r"^(\S+) (UID )?(\w+)\s*(.*)$", re.I)


@dataclass
class Stored:
    uid: int
    raw: bytes
    flags: set[str] = field(default_factory=set)
    fetched: int = 0


class FakeIMAP(FakePlatform):
    label = "IMAP"

    def __init__(
        self, username: str = "bot@crayfish.test", password: str = "secret", idle: bool = True
    ):
        super().__init__()
        self.username, self.password = username, password
        self.mails: list[Stored] = []
        self.logins = 0
        self.offers_idle = idle
        self.idles = 0  # IDLE commands begun
        self.open: set[object] = set()  # the sessions connected now
        self.frozen: set[object] = set()  # sessions that no longer answer
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
            self.lock.notify_all()  # an IDLE says so
            return uid

    def drop(self) -> None:
        """The server closes the connections open now, as one that restarts does."""
        with self.lock:
            sessions = list(self.open)
        for session in sessions:
            try:
                session.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already gone

    def freeze(self) -> None:
        """The connections open now stop answering (they read and say nothing); new ones work."""
        with self.lock:
            self.frozen |= self.open
            self.lock.notify_all()

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
                with fake.lock:
                    fake.open.add(self)
                try:
                    self._serve()
                finally:
                    with fake.lock:
                        fake.open.discard(self)

            def _serve(self) -> None:
                self.wfile.write(b"* OK [CAPABILITY IMAP4rev1] fake mailbox ready\r\n")
                for line in self.rfile:
                    if fake._is_frozen(self):
                        continue  # heard, never answered
                    match = COMMAND.match(line.decode(errors="replace").rstrip("\r\n"))
                    if match is None:
                        self.wfile.write(b"* BAD no tag\r\n")
                        continue
                    tag, uid, name, args = match.groups()
                    if name.upper() == "IDLE" and fake.offers_idle:
                        fake._idle(self, tag)
                    elif not fake._answer(self, tag, bool(uid), name.upper(), args):
                        return

        return Session

    def _answer(self, session, tag: str, by_uid: bool, name: str, args: str) -> bool:  # type: ignore[no-untyped-def]
        out = session.wfile

        def ok(text: str = "done") -> None:
            out.write(f"{tag} OK {name} {text}\r\n".encode())

        if name == "CAPABILITY":
            idle = " IDLE" if self.offers_idle else ""
            out.write(f"* CAPABILITY IMAP4rev1 UIDPLUS{idle}\r\n".encode())
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
                session.told = len(self.mails)
                out.write(f"* {len(self.mails)} EXISTS\r\n* 0 RECENT\r\n".encode())
                out.write(b"* OK [UIDVALIDITY 7] ok\r\n")
                out.write(f"* OK [UIDNEXT {len(self.mails) + 1}] ok\r\n".encode())
            out.write(b"* FLAGS (\\Seen \\Answered)\r\n")
            ok("[READ-WRITE] selected")
        elif name == "SEARCH" and by_uid and args.upper() == "UNSEEN":
            self._tell_size(session)  # as servers do, with any command's answer
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
                if self.hold_acks:
                    self.lock.wait_for(lambda: not self.hold_acks)
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

    def _is_frozen(self, session: object) -> bool:
        with self.lock:
            return session in self.frozen

    def _idle(self, session, tag: str) -> None:  # type: ignore[no-untyped-def]
        """RFC 2177: `+ idling`, then `* n EXISTS` whenever mail arrives, until the client's
        DONE, answered with the tagged OK. A frozen session says nothing, DONE included."""
        with self.lock:
            self.idles += 1
        session.wfile.write(b"+ idling\r\n")
        self._tell_size(session)  # mail that came since the session last heard the count
        done = threading.Event()
        watcher = threading.Thread(target=self._tell_arrivals, args=(session, done), daemon=True)
        watcher.start()
        line = session.rfile.readline()
        done.set()
        with self.lock:
            self.lock.notify_all()
        watcher.join()
        if self._is_frozen(session) or not line:
            return
        if line.strip().upper() == b"DONE":
            session.wfile.write(f"{tag} OK IDLE terminated\r\n".encode())
        else:
            session.wfile.write(f"{tag} BAD expected DONE\r\n".encode())

    def _tell_arrivals(self, session, done: threading.Event) -> None:  # type: ignore[no-untyped-def]
        with self.lock:
            while not done.is_set():
                if session not in self.frozen:
                    try:
                        self._tell_size(session)
                    except OSError:
                        return
                self.lock.wait(0.5)

    def _tell_size(self, session) -> None:  # type: ignore[no-untyped-def]
        """`* n EXISTS` when the mailbox grew since the session last heard its size."""
        with self.lock:
            if len(self.mails) != getattr(session, "told", 0):
                session.told = len(self.mails)
                session.wfile.write(f"* {session.told} EXISTS\r\n".encode())

    def _mail(self, args: str) -> Stored | None:
        uid = int(args.split()[0])
        with self.lock:
            return self.mails[uid - 1] if 0 < uid <= len(self.mails) else None

    def __enter__(self) -> FakeIMAP:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self.lock:
            self.frozen.clear()
        self.release()
        self.server.shutdown()
        self.server.server_close()
