"""Skill files planted by sandboxed commands: links out, FIFOs, devices, swapped links.

Whatever the workspace holds, the service answers: the catalog lists a diagnostic for each
refused file, never its content, never hangs, and every other skill still works.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path

import grpc
import pytest
from crayfish.common.v1 import tools_pb2
from crayfish.skills.v1 import skills_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from skills.gating import SandboxView

from tests.races import flipping

SECRET = "CRAYFISH-HOST-SECRET-7f3a"
ENV_SECRET = "CRAYFISH-ENV-SECRET-91c2"
SECRET_SKILL = f"---\nname: {{name}}\ndescription: {SECRET}\n---\n{SECRET} body\n"


@pytest.fixture
def settings(settings):
    """Unwatched: every request rescans, so files planted after the start are seen at once."""
    settings.watch = False
    return settings


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Files outside the workspace: a secret SKILL.md, a skill folder; a secret in this
    process's environment (the server runs in it, so /proc/self/environ holds it)."""
    monkeypatch.setenv("CRAYFISH_TEST_SECRET", ENV_SECRET)
    folder = tmp_path / "host"
    (folder / "skill-dir").mkdir(parents=True)
    (folder / "secret.md").write_text(SECRET_SKILL.format(name="stolen"))
    (folder / "skill-dir" / "SKILL.md").write_text(SECRET_SKILL.format(name="linked-folder"))
    return folder


def plant(skills: Path, host: Path) -> dict[str, str]:
    """Hostile skill folders; returns folder -> the words its diagnostic must contain."""
    links = {
        "environ-self": "/proc/self/environ",
        "environ-init": "/proc/1/environ",
        "host-secret": str(host / "secret.md"),
        "relative-escape": "../../../host/secret.md",
        "dev-zero": "/dev/zero",
    }
    for folder, target in links.items():
        (skills / folder).mkdir()
        (skills / folder / "SKILL.md").symlink_to(target)
    (skills / "fifo").mkdir()
    os.mkfifo(skills / "fifo" / "SKILL.md")
    (skills / "hard-link").mkdir()
    os.link(host / "secret.md", skills / "hard-link" / "SKILL.md")
    (skills / "linked-folder").symlink_to(host / "skill-dir")
    expected = {folder: "resolves outside the workspace" for folder in links}
    expected["fifo"] = "is not a regular file"
    expected["hard-link"] = "hard links"
    expected["linked-folder"] = "skill folder is a symbolic link"
    return expected


def folder_of(diagnostic_path: str) -> str:
    path = Path(diagnostic_path)
    return path.parent.name if path.name == "SKILL.md" else path.name


def no_secret(*replies: object) -> None:
    for reply in replies:
        text = str(reply)
        assert SECRET not in text and ENV_SECRET not in text, text[:500]


async def read_skill(stub, name: str, path: str = "") -> tools_pb2.RunToolResponse:
    arguments = {"name": name, **({"path": path} if path else {})}
    request = tools_pb2.RunToolRequest(name="read_skill", arguments_json=json.dumps(arguments))
    return await asyncio.wait_for(stub.RunTool(request), 10)


async def test_planted_skill_files_are_diagnostics_and_the_rest_still_works(
    stub, settings, write_skill, host
) -> None:
    skills = settings.workspace_skills_dir
    expected = plant(skills, host)
    write_skill(skills, "weather", description="Get the weather.", body="See references.")
    (skills / "inside-link").mkdir()
    (skills / "inside-link" / "real.md").write_text("---\ndescription: Linked within.\n---\nOK\n")
    (skills / "inside-link" / "SKILL.md").symlink_to("real.md")

    started = time.monotonic()
    listed = await asyncio.wait_for(stub.ListSkills(skills_pb2.ListSkillsRequest()), 10)
    prompt = await asyncio.wait_for(stub.GetSkillsPrompt(skills_pb2.GetSkillsPromptRequest()), 10)
    assert time.monotonic() - started < 5  # a FIFO or /dev/zero did not stall the scan

    reasons = {folder_of(d.path): d.reason for d in listed.diagnostics}
    assert set(reasons) == set(expected), reasons
    for folder, words in expected.items():
        assert words in reasons[folder], (folder, reasons[folder])
    names = {s.name for s in listed.skills}
    assert {"weather", "inside-link", "git", "memory"} <= names
    assert not names & {"stolen", "linked-folder"}
    body = await read_skill(stub, "inside-link")
    assert body.ok and body.output.endswith("OK")
    weather = await read_skill(stub, "weather")
    assert weather.ok and weather.output.endswith("See references.")
    no_secret(listed, prompt, body, weather)


async def test_planted_resource_files_are_refused(stub, settings, write_skill, host) -> None:
    folder = write_skill(settings.workspace_skills_dir, "weather", description="Weather.").parent
    refs = folder / "references"
    refs.mkdir()
    (refs / "api.md").write_text("# API\n")
    (refs / "same-folder.md").symlink_to("api.md")
    (refs / "secret.md").symlink_to(host / "secret.md")
    (refs / "environ.md").symlink_to("/proc/self/environ")
    (refs / "zero.md").symlink_to("/dev/zero")
    os.mkfifo(refs / "pipe.md")
    os.link(host / "secret.md", refs / "hard.md")
    (folder / "scripts").symlink_to(host)  # a whole resource folder pointing out

    got = await stub.GetSkill(skills_pb2.GetSkillRequest(name="weather"))
    assert list(got.resources) == ["references/api.md", "references/hard.md"]
    same = await stub.ReadSkillResource(
        skills_pb2.ReadSkillResourceRequest(name="weather", path="references/same-folder.md")
    )
    assert same.content == "# API\n"
    refused = {
        "references/secret.md": "resolves outside the workspace",
        "references/environ.md": "resolves outside the workspace",
        "references/zero.md": "resolves outside the workspace",
        "references/pipe.md": "is not a regular file",
        "references/hard.md": "hard links",
        "scripts/secret.md": "resolves outside the workspace",
    }
    for path, words in refused.items():
        with pytest.raises(grpc.aio.AioRpcError) as error:
            request = skills_pb2.ReadSkillResourceRequest(name="weather", path=path)
            await asyncio.wait_for(stub.ReadSkillResource(request), 10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, path
        assert words in error.value.details(), (path, error.value.details())
        no_secret(error.value.details())
        tool = await read_skill(stub, "weather", path)
        assert not tool.ok and words in tool.output
        no_secret(tool)
    no_secret(got, await read_skill(stub, "weather"))


async def test_a_skills_folder_swapped_for_a_link_is_a_diagnostic(
    stub, settings, write_skill, host
) -> None:
    skills = settings.workspace_skills_dir
    skills.rmdir()
    write_skill(host, "stolen")
    (host / "stolen" / "SKILL.md").write_text(SECRET_SKILL.format(name="stolen"))
    skills.symlink_to(host)
    listed = await stub.ListSkills(skills_pb2.ListSkillsRequest())
    [diagnostic] = listed.diagnostics
    assert diagnostic.path == str(skills)
    assert "cannot list the workspace skills folder" in diagnostic.reason
    assert "resolves outside the workspace" in diagnostic.reason
    assert {"git", "memory", "summarize-file"} <= {s.name for s in listed.skills}
    no_secret(listed, await stub.GetSkillsPrompt(skills_pb2.GetSkillsPromptRequest()))


def rescan_for(core, seconds: float) -> dict[str, int]:
    """Rescans the catalog as fast as it goes; counts loaded and refused, fails on a leak."""
    seen = {"loaded": 0, "refused": 0}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        snapshot = core.catalog.refresh(SandboxView("race"))
        entry = snapshot.get("racy")
        if entry is not None:
            assert SECRET not in entry.doc.body + entry.doc.meta.description
        seen["loaded" if entry is not None else "refused"] += 1
    return seen


async def test_a_link_swapped_in_between_check_and_use_never_leaks(served, settings, host) -> None:
    stub, core = served.stub, served.core
    folder = settings.workspace_skills_dir / "racy"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: racy\ndescription: Harmless.\n---\nHarmless.\n")
    (host / "secret.md").write_text(SECRET_SKILL.format(name="racy"))
    (folder / ".other").symlink_to(host / "secret.md")
    answers = {"loaded": 0, "refused": 0}
    with flipping(folder / "SKILL.md", folder / ".other"):
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # every request rescans (unwatched)
            listed = await stub.ListSkills(skills_pb2.ListSkillsRequest())
            tool = await read_skill(stub, "racy")
            no_secret(listed, tool)
            answers["loaded" if tool.ok else "refused"] += 1
        direct = await asyncio.to_thread(rescan_for, core, 1.0)
    assert min(answers.values()) > 0 and min(direct.values()) > 0, (answers, direct)
    print(f"\nSKILL.md flipping to a link: over gRPC {answers}; direct rescans {direct}")


async def test_a_device_node_in_the_workspace_is_refused(stub, settings) -> None:
    folder = settings.workspace_skills_dir / "device"
    folder.mkdir()
    try:
        os.mknod(folder / "SKILL.md", stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero
    except PermissionError:
        pytest.skip("cannot create device nodes here (needs CAP_MKNOD)")
    listed = await asyncio.wait_for(stub.ListSkills(skills_pb2.ListSkillsRequest()), 10)
    [diagnostic] = listed.diagnostics
    assert diagnostic.reason == "SKILL.md is not a regular file (FIFO, socket or device)"


async def test_service_stays_healthy_after_hostile_files(settings, write_skill, host) -> None:
    from skills.server import SERVICE_NAME, start_service

    expected = plant(settings.workspace_skills_dir, host)
    service, core = await start_service(settings)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{service.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            assert len(core.catalog.snapshot.diagnostics) == len(expected)
    finally:
        await service.stop(0)
        await core.stop()


async def test_installing_a_workspace_folder_reads_nothing_outside_it(
    stub, settings, write_skill, host
) -> None:
    skills = settings.workspace_skills_dir
    source = write_skill(skills, "notes", description="Notes.").parent
    (source / "references").mkdir()
    (source / "references" / "notes.md").write_text("harmless notes\n")
    (skills / "linked-source").symlink_to(host / "skill-dir")

    async def install(folder: Path) -> skills_pb2.InstallSkillResponse | grpc.aio.AioRpcError:
        request = skills_pb2.InstallSkillRequest(folder_path=str(folder), replace=True)
        try:
            return await asyncio.wait_for(stub.InstallSkill(request), 10)
        except grpc.aio.AioRpcError as error:
            return error

    linked = await install(skills / "linked-source")
    assert isinstance(linked, grpc.aio.AioRpcError)
    assert linked.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "resolves outside the workspace" in linked.details()

    # A file flipped, over and over, with a link to the secret kept elsewhere in the workspace.
    parked = settings.workspace / ".parked"
    parked.mkdir()
    (parked / "notes.md").symlink_to(host / "secret.md")
    outcomes: dict[str, int] = {}
    with flipping(source / "references" / "notes.md", parked / "notes.md"):
        for _ in range(150):
            reply = await install(source)
            if isinstance(reply, grpc.aio.AioRpcError):
                assert reply.code() == grpc.StatusCode.INVALID_ARGUMENT, reply
                no_secret(reply.details())
                kind = "refused"
            else:
                copied = settings.managed_dir / "notes" / "references" / "notes.md"
                assert SECRET not in copied.read_text()
                no_secret(reply)
                kind = "installed"
            outcomes[kind] = outcomes.get(kind, 0) + 1
    assert set(outcomes) == {"installed", "refused"}, outcomes
    print(f"\nfolder install while a file flips to a link: {outcomes}")
