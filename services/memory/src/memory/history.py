"""The history of memory's files: a bare git repository (dulwich) in the data folder.

Each revision holds the whole set of tracked files (MEMORY.md, USER.md, SOUL.md, memory/**/*.md)
as they were, with its author (`session:<id>`, `api` or `hand`) and reason. Content reaches the
repository only as bytes this service read itself (through `SafeRoot`), so nothing in the
workspace, a link or a FIFO, can make git read or write anywhere else.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from dulwich.diff_tree import tree_changes
from dulwich.index import commit_tree
from dulwich.object_store import iter_tree_contents
from dulwich.objects import Blob, Commit, ObjectID
from dulwich.patch import write_tree_diff
from dulwich.refs import Ref
from dulwich.repo import Repo

BRANCH = Ref(b"refs/heads/main")
FILE_MODE = 0o100644
EMAIL = "memory@crayfish.invalid"
MAX_REASON_CHARS = 2000
MAX_LOG = 1000
# Writing a loose object costs a file and an fsync; from this many new blobs, one pack is cheaper.
PACK_FROM = 32
REV_PATTERN = re.compile(r"^[0-9a-f]{4,40}$")


class RevisionNotFound(LookupError):
    """No revision by that name in the history."""


@dataclass(frozen=True)
class Revision:
    """One revision: its id, when (UTC, ISO 8601), who, why, and the files it changed."""

    rev: str
    time: str
    author: str
    reason: str
    files: list[str]


@dataclass(frozen=True)
class RevisionDiff:
    revision: Revision
    diff: str  # unified diff against the revision before it


def blob_id(data: bytes) -> ObjectID:
    """The git object id the bytes would have, to compare with the history without writing."""
    return Blob.from_string(data).id


def clean_author(author: str) -> str:
    """A git identity's name may not hold angle brackets or line breaks."""
    return re.sub(r"[<>\r\n\x00]", "_", author.strip()) or "unknown"


class MemoryHistory:
    """The repository; thread-safe (one lock), every call blocks."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if (folder / "HEAD").exists():
            self.repo = Repo(str(folder))
        else:
            self.repo = Repo.init_bare(str(folder), default_branch=b"main")
        self.folder = folder
        self.lock = threading.Lock()

    def close(self) -> None:
        self.repo.close()

    def head(self) -> ObjectID | None:
        try:
            return self.repo.refs[BRANCH]
        except KeyError:
            return None

    def entries(self, rev: ObjectID | None = None) -> dict[str, ObjectID]:
        """Tracked path -> blob id at a revision (default: the newest); empty before the first."""
        commit = rev or self.head()
        if commit is None:
            return {}
        tree = self._commit(commit).tree
        store = self.repo.object_store
        return {e.path.decode(): e.sha for e in iter_tree_contents(store, tree) if e.path}

    def commit(
        self, changes: Mapping[str, bytes | None], author: str, reason: str
    ) -> Revision | None:
        """A revision applying `changes` (path -> bytes, None = deleted); None if none moved."""
        with self.lock:
            parent = self.head()
            files = self.entries(parent)
            store = self.repo.object_store
            fresh: dict[ObjectID, Blob] = {}
            for path, data in changes.items():
                if data is None:
                    files.pop(path, None)
                    continue
                blob = Blob.from_string(data)
                if files.get(path) != blob.id:
                    fresh[blob.id] = blob
                    files[path] = blob.id
            self._store(list(fresh.values()))
            blobs = [(p.encode(), sha, FILE_MODE) for p, sha in sorted(files.items())]
            tree = commit_tree(store, blobs)
            if parent is not None and self._commit(parent).tree == tree:
                return None
            made = self._write_commit(tree, parent, author, reason)
            return self._revision(made)

    def _store(self, blobs: list[Blob]) -> None:
        """Many blobs (the first revision) go into one pack; a few stay loose objects."""
        if len(blobs) >= PACK_FROM:
            self.repo.object_store.add_objects([(blob, None) for blob in blobs])
            return
        for blob in blobs:
            self.repo.object_store.add_object(blob)

    def _write_commit(
        self, tree: ObjectID, parent: ObjectID | None, author: str, reason: str
    ) -> Commit:
        now = int(dt.datetime.now(dt.UTC).timestamp())
        ident = f"{clean_author(author)} <{EMAIL}>".encode()
        commit = Commit()
        commit.tree = tree
        commit.parents = [parent] if parent else []
        commit.author = commit.committer = ident
        commit.author_time = commit.commit_time = now
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = (reason.strip()[:MAX_REASON_CHARS] or "(no reason given)").encode() + b"\n"
        self.repo.object_store.add_object(commit)
        if not self.repo.refs.set_if_equals(BRANCH, parent, commit.id):
            raise RuntimeError("the memory history moved during a commit")
        return commit

    def resolve(self, rev: str) -> ObjectID:
        """The full id of a revision named by its id or a unique prefix (4+ hex digits)."""
        name = rev.strip().lower()
        if not REV_PATTERN.match(name):
            raise ValueError(f"{rev!r} is not a revision id (4 to 40 hex digits)")
        if len(name) == 40:
            try:
                found = self.repo[name.encode()]
            except KeyError:
                found = None
            if isinstance(found, Commit):
                return found.id
            raise RevisionNotFound(f"no revision {rev!r} in the memory history")
        matches = [c.id for c in self._walk(MAX_LOG * 100) if c.id.decode().startswith(name)]
        if not matches:
            raise RevisionNotFound(f"no revision {rev!r} in the memory history")
        if len(matches) > 1:
            raise ValueError(f"{rev!r} names {len(matches)} revisions; give more digits")
        return matches[0]

    def log(self, limit: int = 50, path: str = "") -> list[Revision]:
        """Newest first; with `path`, only revisions that changed that file."""
        found: list[Revision] = []
        with self.lock:
            for commit in self._walk(MAX_LOG * 100):
                revision = self._revision(commit)
                if path and path not in revision.files:
                    continue
                found.append(revision)
                if len(found) >= min(limit, MAX_LOG):
                    break
        return found

    def show(self, rev: str) -> RevisionDiff:
        with self.lock:
            commit = self._commit(self.resolve(rev))
            out = io.BytesIO()
            write_tree_diff(out, self.repo.object_store, self._parent_tree(commit), commit.tree)
            return RevisionDiff(self._revision(commit), out.getvalue().decode("utf-8", "replace"))

    def files_at(self, rev: str) -> tuple[str, dict[str, bytes]]:
        """The full id of `rev` and every tracked file's bytes as they were there."""
        with self.lock:
            full = self.resolve(rev)
            entries = self.entries(full)
            return full.decode(), {p: self._blob(sha) for p, sha in entries.items()}

    def _blob(self, sha: ObjectID) -> bytes:
        blob = self.repo.object_store[sha]
        assert isinstance(blob, Blob)
        return blob.data

    def _commit(self, sha: ObjectID) -> Commit:
        commit = self.repo[sha]
        assert isinstance(commit, Commit)
        return commit

    def _walk(self, limit: int) -> Iterator[Commit]:
        head = self.head()
        if head is not None:
            for entry in self.repo.get_walker(include=[head], max_entries=limit):
                yield entry.commit

    def _parent_tree(self, commit: Commit) -> ObjectID | None:
        return self._commit(commit.parents[0]).tree if commit.parents else None

    def _revision(self, commit: Commit) -> Revision:
        store = self.repo.object_store
        changes = tree_changes(store, self._parent_tree(commit), commit.tree)
        files = sorted(
            {e.path.decode() for c in changes for e in (c.old, c.new) if e is not None and e.path}
        )
        author = commit.author.decode("utf-8", "replace").split(" <", 1)[0]
        when = dt.datetime.fromtimestamp(commit.author_time, dt.UTC)
        return Revision(
            rev=commit.id.decode(),
            time=when.isoformat().replace("+00:00", "Z"),
            author=author,
            reason=commit.message.decode("utf-8", "replace").strip(),
            files=files,
        )
