from crayfish.common.v1 import tools_pb2 as _tools_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListServersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class McpServerStatus(_message.Message):
    __slots__ = ("name", "transport", "state", "error", "tool_count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    transport: str
    state: str
    error: str
    tool_count: int
    def __init__(self, name: _Optional[str] = ..., transport: _Optional[str] = ..., state: _Optional[str] = ..., error: _Optional[str] = ..., tool_count: _Optional[int] = ...) -> None: ...

class ListServersResponse(_message.Message):
    __slots__ = ("servers", "config_problems")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[McpServerStatus]
    config_problems: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[_Union[McpServerStatus, _Mapping]]] = ..., config_problems: _Optional[_Iterable[str]] = ...) -> None: ...
