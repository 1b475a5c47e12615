from crayfish.common.v1 import tools_pb2 as _tools_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMemoryRequest(_message.Message):
    __slots__ = ("query", "top_k", "min_score", "path_prefix", "strategy", "snippet_chars")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MIN_SCORE_FIELD_NUMBER: _ClassVar[int]
    PATH_PREFIX_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_CHARS_FIELD_NUMBER: _ClassVar[int]
    query: str
    top_k: int
    min_score: float
    path_prefix: str
    strategy: str
    snippet_chars: int
    def __init__(self, query: _Optional[str] = ..., top_k: _Optional[int] = ..., min_score: _Optional[float] = ..., path_prefix: _Optional[str] = ..., strategy: _Optional[str] = ..., snippet_chars: _Optional[int] = ...) -> None: ...

class MemoryHit(_message.Message):
    __slots__ = ("path", "start_line", "end_line", "score", "snippet", "citation", "source")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SNIPPET_FIELD_NUMBER: _ClassVar[int]
    CITATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    citation: str
    source: str
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., score: _Optional[float] = ..., snippet: _Optional[str] = ..., citation: _Optional[str] = ..., source: _Optional[str] = ...) -> None: ...

class SearchMemoryResponse(_message.Message):
    __slots__ = ("hits", "strategy")
    HITS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[MemoryHit]
    strategy: str
    def __init__(self, hits: _Optional[_Iterable[_Union[MemoryHit, _Mapping]]] = ..., strategy: _Optional[str] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ("path", "start_line", "line_count")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    LINE_COUNT_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    line_count: int
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., line_count: _Optional[int] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ("path", "text", "start_line", "end_line", "total_lines")
    PATH_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LINES_FIELD_NUMBER: _ClassVar[int]
    path: str
    text: str
    start_line: int
    end_line: int
    total_lines: int
    def __init__(self, path: _Optional[str] = ..., text: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., total_lines: _Optional[int] = ...) -> None: ...

class WriteMemoryRequest(_message.Message):
    __slots__ = ("text", "path", "reason")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    text: str
    path: str
    reason: str
    def __init__(self, text: _Optional[str] = ..., path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class WriteMemoryResponse(_message.Message):
    __slots__ = ("path", "start_line", "end_line", "citation")
    PATH_FIELD_NUMBER: _ClassVar[int]
    START_LINE_FIELD_NUMBER: _ClassVar[int]
    END_LINE_FIELD_NUMBER: _ClassVar[int]
    CITATION_FIELD_NUMBER: _ClassVar[int]
    path: str
    start_line: int
    end_line: int
    citation: str
    def __init__(self, path: _Optional[str] = ..., start_line: _Optional[int] = ..., end_line: _Optional[int] = ..., citation: _Optional[str] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("path",)
    PATH_FIELD_NUMBER: _ClassVar[int]
    path: str
    def __init__(self, path: _Optional[str] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ("chunks_removed", "file_deleted")
    CHUNKS_REMOVED_FIELD_NUMBER: _ClassVar[int]
    FILE_DELETED_FIELD_NUMBER: _ClassVar[int]
    chunks_removed: int
    file_deleted: bool
    def __init__(self, chunks_removed: _Optional[int] = ..., file_deleted: _Optional[bool] = ...) -> None: ...

class SyncMemoryRequest(_message.Message):
    __slots__ = ("force",)
    FORCE_FIELD_NUMBER: _ClassVar[int]
    force: bool
    def __init__(self, force: _Optional[bool] = ...) -> None: ...

class SyncMemoryResponse(_message.Message):
    __slots__ = ("files_indexed", "files_unchanged", "files_removed", "chunks_indexed", "duration_ms", "skipped")
    class SkippedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILES_INDEXED_FIELD_NUMBER: _ClassVar[int]
    FILES_UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    FILES_REMOVED_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_INDEXED_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    files_indexed: int
    files_unchanged: int
    files_removed: int
    chunks_indexed: int
    duration_ms: float
    skipped: _containers.ScalarMap[str, str]
    def __init__(self, files_indexed: _Optional[int] = ..., files_unchanged: _Optional[int] = ..., files_removed: _Optional[int] = ..., chunks_indexed: _Optional[int] = ..., duration_ms: _Optional[float] = ..., skipped: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GetMemoryStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetMemoryStatsResponse(_message.Message):
    __slots__ = ("files", "chunks", "backend", "model", "dimension", "default_strategy", "skipped")
    class SkippedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    files: int
    chunks: int
    backend: str
    model: str
    dimension: int
    default_strategy: str
    skipped: _containers.ScalarMap[str, str]
    def __init__(self, files: _Optional[int] = ..., chunks: _Optional[int] = ..., backend: _Optional[str] = ..., model: _Optional[str] = ..., dimension: _Optional[int] = ..., default_strategy: _Optional[str] = ..., skipped: _Optional[_Mapping[str, str]] = ...) -> None: ...

class MemoryRevision(_message.Message):
    __slots__ = ("rev", "time", "author", "reason", "files")
    REV_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    rev: str
    time: str
    author: str
    reason: str
    files: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rev: _Optional[str] = ..., time: _Optional[str] = ..., author: _Optional[str] = ..., reason: _Optional[str] = ..., files: _Optional[_Iterable[str]] = ...) -> None: ...

class ListMemoryHistoryRequest(_message.Message):
    __slots__ = ("limit", "path")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    limit: int
    path: str
    def __init__(self, limit: _Optional[int] = ..., path: _Optional[str] = ...) -> None: ...

class ListMemoryHistoryResponse(_message.Message):
    __slots__ = ("revisions",)
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[MemoryRevision]
    def __init__(self, revisions: _Optional[_Iterable[_Union[MemoryRevision, _Mapping]]] = ...) -> None: ...

class GetMemoryRevisionRequest(_message.Message):
    __slots__ = ("rev",)
    REV_FIELD_NUMBER: _ClassVar[int]
    rev: str
    def __init__(self, rev: _Optional[str] = ...) -> None: ...

class GetMemoryRevisionResponse(_message.Message):
    __slots__ = ("revision", "diff")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DIFF_FIELD_NUMBER: _ClassVar[int]
    revision: MemoryRevision
    diff: str
    def __init__(self, revision: _Optional[_Union[MemoryRevision, _Mapping]] = ..., diff: _Optional[str] = ...) -> None: ...

class RestoreMemoryRequest(_message.Message):
    __slots__ = ("rev", "reason", "path")
    REV_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    rev: str
    reason: str
    path: str
    def __init__(self, rev: _Optional[str] = ..., reason: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class RestoreMemoryResponse(_message.Message):
    __slots__ = ("restored", "revision", "files")
    RESTORED_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    restored: str
    revision: MemoryRevision
    files: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, restored: _Optional[str] = ..., revision: _Optional[_Union[MemoryRevision, _Mapping]] = ..., files: _Optional[_Iterable[str]] = ...) -> None: ...
