"""The service over real gRPC on a free port: health, catalog RPCs, the read_skill tool."""

from __future__ import annotations

import json

import grpc
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.skills.v1 import skills_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from skills.server import SERVICE_NAME, start_service

GH = 'metadata: {"nanobot": {"emoji": "🐙", "requires": {"bins": ["gh-not-here"]}}}'


@pytest.fixture
def workspace_skills(settings, write_skill):
    root = settings.workspace_skills_dir
    write_skill(
        root, "weather", description="Get the weather & forecasts.", body="Run `scripts/w.sh`."
    )
    (root / "weather" / "scripts").mkdir()
    (root / "weather" / "scripts" / "w.sh").write_text("#!/bin/sh\necho sunny\n")
    (root / "weather" / "references").mkdir()
    (root / "weather" / "references" / "api.md").write_text("# API\nGET /forecast\n")
    write_skill(root, "github", description="Use gh.", extra=GH)
    write_skill(root, "broken", raw="---\ndescription: [unclosed\n---\nbody")
    return root


async def test_health_reports_serving(settings) -> None:
    service, core = await start_service(settings)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        await service.stop(0)
        await core.stop()


async def test_list_skills_shows_workspace_builtin_and_diagnostics(workspace_skills, stub) -> None:
    reply = await stub.ListSkills(skills_pb2.ListSkillsRequest())
    skills = {s.name: s for s in reply.skills}
    assert {"weather", "github", "git", "memory", "summarize-file"} <= set(skills)
    weather = skills["weather"]
    assert weather.source == "workspace" and weather.available
    assert weather.location == str(workspace_skills / "weather" / "SKILL.md")
    github = skills["github"]
    assert (github.available, list(github.missing), github.emoji) == (
        False,
        ["bin:gh-not-here"],
        "🐙",
    )
    assert skills["git"].source == "builtin"
    assert [d.path for d in reply.diagnostics] == [str(workspace_skills / "broken" / "SKILL.md")]
    assert "invalid YAML" in reply.diagnostics[0].reason
    assert reply.requirements_source.startswith("local PATH")
    assert len(reply.version) == 16


async def test_prompt_rpc_returns_xml_and_always_bodies(workspace_skills, stub) -> None:
    reply = await stub.GetSkillsPrompt(skills_pb2.GetSkillsPromptRequest())
    assert reply.xml.startswith("<available_skills>")
    assert "Get the weather &amp; forecasts." in reply.xml
    assert "<requires>bin:gh-not-here</requires>" in reply.xml
    assert 'name="memory"' in reply.always_bodies and "memory_write" in reply.always_bodies
    small = await stub.GetSkillsPrompt(skills_pb2.GetSkillsPromptRequest(max_chars=600))
    assert len(small.xml) <= 600 and small.omitted > 0
    assert small.version == reply.version


async def test_get_skill_and_resources(workspace_skills, stub) -> None:
    reply = await stub.GetSkill(skills_pb2.GetSkillRequest(name="weather"))
    assert reply.body == "Run `scripts/w.sh`."
    assert list(reply.resources) == ["scripts/w.sh", "references/api.md"]
    resource = await stub.ReadSkillResource(
        skills_pb2.ReadSkillResourceRequest(name="weather", path="references/api.md")
    )
    assert resource.content == "# API\nGET /forecast\n"

    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await stub.GetSkill(skills_pb2.GetSkillRequest(name="nope"))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert "weather" in unknown.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as escape:
        await stub.ReadSkillResource(
            skills_pb2.ReadSkillResourceRequest(name="weather", path="../github/SKILL.md")
        )
    assert escape.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stub.ReadSkillResource(
            skills_pb2.ReadSkillResourceRequest(name="weather", path="scripts/none.sh")
        )
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert "scripts/w.sh" in missing.value.details()


async def test_read_skill_tool(workspace_skills, stub) -> None:
    tools = await stub.ListTools(tools_pb2.ListToolsRequest())
    assert [t.name for t in tools.tools] == ["read_skill"]
    assert json.loads(tools.tools[0].parameters_json)["required"] == ["name"]

    async def run(args: str) -> tools_pb2.RunToolResponse:
        return await stub.RunTool(tools_pb2.RunToolRequest(name="read_skill", arguments_json=args))

    body = await run('{"name": "weather"}')
    assert body.ok
    assert f"Folder: {workspace_skills / 'weather'}" in body.output
    assert "scripts/w.sh" in body.output and body.output.endswith("Run `scripts/w.sh`.")
    script = await run('{"name": "weather", "path": "scripts/w.sh"}')
    assert (script.ok, script.output) == (True, "#!/bin/sh\necho sunny\n")
    gated = await run('{"name": "github"}')
    assert gated.ok and "missing: bin:gh-not-here" in gated.output

    unknown = await run('{"name": "wether"}')
    assert not unknown.ok and "Unknown skill 'wether'" in unknown.output
    assert unknown.output == f"Error: {unknown.error}"
    assert "weather" in unknown.output
    bad_path = await run('{"name": "weather", "path": "scripts/nope.sh"}')
    assert not bad_path.ok and "scripts/w.sh, references/api.md" in bad_path.output
    outside = await run('{"name": "weather", "path": "/etc/passwd"}')
    assert not outside.ok and "absolute" in outside.output
    extra = await run('{"name": "weather", "page": 2}')
    assert not extra.ok and "Additional properties are not allowed ('page'" in extra.output
    bad_json = await run("{name: weather")
    assert not bad_json.ok and "not valid JSON" in bad_json.output
    wrong_tool = await stub.RunTool(tools_pb2.RunToolRequest(name="exec", arguments_json="{}"))
    assert not wrong_tool.ok and "read_skill" in wrong_tool.output
