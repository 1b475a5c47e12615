from crayfish.common.v1 import tools_pb2 as _tools_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutputChunk(_message.Message):
    __slots__ = ("stream", "data")
    STREAM_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    stream: str
    data: bytes
    def __init__(self, stream: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...

class RunToolEvent(_message.Message):
    __slots__ = ("chunk", "result")
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    chunk: OutputChunk
    result: _tools_pb2.RunToolResponse
    def __init__(self, chunk: _Optional[_Union[OutputChunk, _Mapping]] = ..., result: _Optional[_Union[_tools_pb2.RunToolResponse, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeSandboxRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeSandboxResponse(_message.Message):
    __slots__ = ("backend", "insecure", "warnings", "available_bins", "workspace_path", "skill_roots", "env_names", "skill_secrets", "secrets_fault")
    class SkillRootsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    INSECURE_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_BINS_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_PATH_FIELD_NUMBER: _ClassVar[int]
    SKILL_ROOTS_FIELD_NUMBER: _ClassVar[int]
    ENV_NAMES_FIELD_NUMBER: _ClassVar[int]
    SKILL_SECRETS_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FAULT_FIELD_NUMBER: _ClassVar[int]
    backend: str
    insecure: bool
    warnings: _containers.RepeatedScalarFieldContainer[str]
    available_bins: _containers.RepeatedScalarFieldContainer[str]
    workspace_path: str
    skill_roots: _containers.ScalarMap[str, str]
    env_names: _containers.RepeatedScalarFieldContainer[str]
    skill_secrets: _containers.RepeatedCompositeFieldContainer[SkillSecret]
    secrets_fault: str
    def __init__(self, backend: _Optional[str] = ..., insecure: _Optional[bool] = ..., warnings: _Optional[_Iterable[str]] = ..., available_bins: _Optional[_Iterable[str]] = ..., workspace_path: _Optional[str] = ..., skill_roots: _Optional[_Mapping[str, str]] = ..., env_names: _Optional[_Iterable[str]] = ..., skill_secrets: _Optional[_Iterable[_Union[SkillSecret, _Mapping]]] = ..., secrets_fault: _Optional[str] = ...) -> None: ...

class SkillSecret(_message.Message):
    __slots__ = ("name", "skills")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    skills: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., skills: _Optional[_Iterable[str]] = ...) -> None: ...

class KillProcessesRequest(_message.Message):
    __slots__ = ("session_id", "started_after", "started_before")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AFTER_FIELD_NUMBER: _ClassVar[int]
    STARTED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    started_after: float
    started_before: float
    def __init__(self, session_id: _Optional[str] = ..., started_after: _Optional[float] = ..., started_before: _Optional[float] = ...) -> None: ...

class KillProcessesResponse(_message.Message):
    __slots__ = ("killed",)
    KILLED_FIELD_NUMBER: _ClassVar[int]
    killed: int
    def __init__(self, killed: _Optional[int] = ...) -> None: ...

class WatchProcessesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ProcessEnd(_message.Message):
    __slots__ = ("process_id", "session_id", "status", "exit_code", "reason", "command", "output_tail")
    PROCESS_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    process_id: str
    session_id: str
    status: str
    exit_code: int
    reason: str
    command: str
    output_tail: str
    def __init__(self, process_id: _Optional[str] = ..., session_id: _Optional[str] = ..., status: _Optional[str] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., command: _Optional[str] = ..., output_tail: _Optional[str] = ...) -> None: ...
