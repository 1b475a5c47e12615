from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolSpec(_message.Message):
    __slots__ = ("name", "description", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NotOfferedTool(_message.Message):
    __slots__ = ("name", "reason")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools", "not_offered")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    NOT_OFFERED_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[ToolSpec]
    not_offered: _containers.RepeatedCompositeFieldContainer[NotOfferedTool]
    def __init__(self, tools: _Optional[_Iterable[_Union[ToolSpec, _Mapping]]] = ..., not_offered: _Optional[_Iterable[_Union[NotOfferedTool, _Mapping]]] = ...) -> None: ...

class RunToolRequest(_message.Message):
    __slots__ = ("name", "arguments_json", "session_id", "call_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments_json: str
    session_id: str
    call_id: str
    def __init__(self, name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., session_id: _Optional[str] = ..., call_id: _Optional[str] = ...) -> None: ...

class RunToolResponse(_message.Message):
    __slots__ = ("ok", "output", "result_json", "error", "exit_code", "duration_ms", "truncated")
    OK_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    output: str
    result_json: str
    error: str
    exit_code: int
    duration_ms: float
    truncated: bool
    def __init__(self, ok: _Optional[bool] = ..., output: _Optional[str] = ..., result_json: _Optional[str] = ..., error: _Optional[str] = ..., exit_code: _Optional[int] = ..., duration_ms: _Optional[float] = ..., truncated: _Optional[bool] = ...) -> None: ...
