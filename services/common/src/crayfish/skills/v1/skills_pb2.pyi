from crayfish.common.v1 import tools_pb2 as _tools_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Skill(_message.Message):
    __slots__ = ("name", "description", "location", "source", "available", "missing", "emoji", "always", "version", "shadowed", "install_json", "warnings", "primary_env", "install", "model_invocable", "sandbox_folder")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    ALWAYS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SHADOWED_FIELD_NUMBER: _ClassVar[int]
    INSTALL_JSON_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_ENV_FIELD_NUMBER: _ClassVar[int]
    INSTALL_FIELD_NUMBER: _ClassVar[int]
    MODEL_INVOCABLE_FIELD_NUMBER: _ClassVar[int]
    SANDBOX_FOLDER_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    location: str
    source: str
    available: bool
    missing: _containers.RepeatedScalarFieldContainer[str]
    emoji: str
    always: bool
    version: str
    shadowed: _containers.RepeatedScalarFieldContainer[str]
    install_json: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    primary_env: str
    install: InstallRecord
    model_invocable: bool
    sandbox_folder: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., location: _Optional[str] = ..., source: _Optional[str] = ..., available: _Optional[bool] = ..., missing: _Optional[_Iterable[str]] = ..., emoji: _Optional[str] = ..., always: _Optional[bool] = ..., version: _Optional[str] = ..., shadowed: _Optional[_Iterable[str]] = ..., install_json: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., primary_env: _Optional[str] = ..., install: _Optional[_Union[InstallRecord, _Mapping]] = ..., model_invocable: _Optional[bool] = ..., sandbox_folder: _Optional[str] = ...) -> None: ...

class InstallRecord(_message.Message):
    __slots__ = ("source", "digest", "installed_at", "version")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    INSTALLED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    source: str
    digest: str
    installed_at: str
    version: str
    def __init__(self, source: _Optional[str] = ..., digest: _Optional[str] = ..., installed_at: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class Diagnostic(_message.Message):
    __slots__ = ("path", "reason")
    PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    path: str
    reason: str
    def __init__(self, path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListSkillsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSkillsResponse(_message.Message):
    __slots__ = ("skills", "diagnostics", "version", "requirements_source")
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_SOURCE_FIELD_NUMBER: _ClassVar[int]
    skills: _containers.RepeatedCompositeFieldContainer[Skill]
    diagnostics: _containers.RepeatedCompositeFieldContainer[Diagnostic]
    version: str
    requirements_source: str
    def __init__(self, skills: _Optional[_Iterable[_Union[Skill, _Mapping]]] = ..., diagnostics: _Optional[_Iterable[_Union[Diagnostic, _Mapping]]] = ..., version: _Optional[str] = ..., requirements_source: _Optional[str] = ...) -> None: ...

class GetSkillsPromptRequest(_message.Message):
    __slots__ = ("max_chars",)
    MAX_CHARS_FIELD_NUMBER: _ClassVar[int]
    max_chars: int
    def __init__(self, max_chars: _Optional[int] = ...) -> None: ...

class GetSkillsPromptResponse(_message.Message):
    __slots__ = ("xml", "always_bodies", "version", "omitted")
    XML_FIELD_NUMBER: _ClassVar[int]
    ALWAYS_BODIES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    xml: str
    always_bodies: str
    version: str
    omitted: int
    def __init__(self, xml: _Optional[str] = ..., always_bodies: _Optional[str] = ..., version: _Optional[str] = ..., omitted: _Optional[int] = ...) -> None: ...

class GetSkillRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetSkillResponse(_message.Message):
    __slots__ = ("skill", "body", "resources")
    SKILL_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    skill: Skill
    body: str
    resources: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, skill: _Optional[_Union[Skill, _Mapping]] = ..., body: _Optional[str] = ..., resources: _Optional[_Iterable[str]] = ...) -> None: ...

class ReadSkillResourceRequest(_message.Message):
    __slots__ = ("name", "path")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...

class ReadSkillResourceResponse(_message.Message):
    __slots__ = ("content",)
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    content: str
    def __init__(self, content: _Optional[str] = ...) -> None: ...

class InstallSkillRequest(_message.Message):
    __slots__ = ("folder_path", "archive", "archive_name", "replace")
    FOLDER_PATH_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_NAME_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    folder_path: str
    archive: bytes
    archive_name: str
    replace: bool
    def __init__(self, folder_path: _Optional[str] = ..., archive: _Optional[bytes] = ..., archive_name: _Optional[str] = ..., replace: _Optional[bool] = ...) -> None: ...

class InstallSkillResponse(_message.Message):
    __slots__ = ("skill", "digest", "warnings", "record")
    SKILL_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    skill: Skill
    digest: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    record: InstallRecord
    def __init__(self, skill: _Optional[_Union[Skill, _Mapping]] = ..., digest: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., record: _Optional[_Union[InstallRecord, _Mapping]] = ...) -> None: ...

class UninstallSkillRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class UninstallSkillResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
