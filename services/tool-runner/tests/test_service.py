"""The tool-runner through a real gRPC server: catalogue, file tools, exec, bad input."""

from __future__ import annotations

import json

from crayfish.common.v1 import tools_pb2
from crayfish.tool_runner.v1 import tool_runner_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tool_runner.servicer import SERVICE_NAME

EXPECTED_TOOLS = {
    "exec",
    "process",
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "read_spreadsheet",
}


async def test_lists_every_tool_with_a_schema_and_one_line_description(runner):
    reply = await runner.stub.ListTools(tools_pb2.ListToolsRequest())
    tools = {t.name: t for t in reply.tools}
    assert set(tools) == EXPECTED_TOOLS
    for tool in tools.values():
        schema = json.loads(tool.parameters_json)
        assert schema["type"] == "object" and "properties" in schema
        assert tool.description and "\n" not in tool.description
    assert json.loads(tools["exec"].parameters_json)["required"] == ["command"]


async def test_health_reports_serving_under_the_full_service_name(runner):
    health = health_pb2_grpc.HealthStub(runner.channel)
    reply = await health.Check(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_exec_reports_exit_code_stdout_and_stderr(runner):
    reply = await runner.sh("echo hello; echo oops >&2; exit 3")
    assert reply.ok and reply.exit_code == 3
    assert "exit code: 3" in reply.output
    assert "hello" in reply.output and "oops" in reply.output
    data = runner.data(reply)
    assert data["stdout"] == "hello\n" and data["stderr"] == "oops\n"
    assert reply.duration_ms > 0 and not reply.truncated


async def test_exec_runs_in_the_workspace_and_files_are_shared(runner):
    await runner.run("write_file", path="sub/in.txt", content="from the tool\n")
    reply = await runner.sh("cat in.txt && pwd && echo made > out.txt", workdir="sub")
    assert "from the tool" in reply.output and "/workspace/sub" in reply.output
    assert (runner.workspace / "sub" / "out.txt").read_text() == "made\n"
    again = await runner.run("read_file", path="sub/out.txt")
    assert again.ok and again.output == "made\n"


async def test_exec_env_and_timeout_arguments(runner):
    reply = await runner.sh("echo $GREETING", env={"GREETING": "hi there"})
    assert "hi there" in reply.output
    slow = await runner.sh("sleep 30", timeout=0.5)
    assert slow.ok and "timed out" in slow.output and runner.data(slow)["timed_out"]


async def test_write_read_edit_and_list(runner):
    wrote = await runner.run("write_file", path="notes/todo.md", content="a\nb\nc\nb2\n")
    assert wrote.ok and "created" in wrote.output
    page = await runner.run("read_file", path="notes/todo.md", offset=2, limit=2)
    assert page.output.startswith("b\nc\n") and "offset=4" in page.output
    edit = await runner.run("edit_file", path="notes/todo.md", old="c\n", new="C!\n")
    assert edit.ok
    assert (runner.workspace / "notes/todo.md").read_text() == "a\nb\nC!\nb2\n"
    twice = await runner.run("edit_file", path="notes/todo.md", old="b", new="x")
    assert not twice.ok and "2 times" in twice.output
    missing = await runner.run("edit_file", path="notes/todo.md", old="zzz", new="x")
    assert not missing.ok and "not found" in missing.output
    listing = await runner.run("list_dir", depth=2)
    assert "notes/" in listing.output and "notes/todo.md (10 bytes)" in listing.output


async def test_bad_arguments_are_readable_results_not_rpc_errors(runner):
    bad_json = await runner.stub.RunTool(
        tools_pb2.RunToolRequest(name="read_file", arguments_json="{not json")
    )
    assert not bad_json.ok and "not valid JSON" in bad_json.output
    wrong_type = await runner.run("read_file", path=5)
    assert not wrong_type.ok and "path: 5 is not of type 'string'" in wrong_type.output
    missing = await runner.run("write_file", path="x")
    assert not missing.ok and "'content' is a required property" in missing.output
    extra = await runner.run("list_dir", colour="blue")
    assert not extra.ok and "('colour' was unexpected)" in extra.output
    unknown = await runner.run("teleport")
    assert not unknown.ok and "unknown tool" in unknown.output


async def test_paths_outside_the_workspace_are_refused(runner):
    for path in ["/etc/passwd", "../../etc/passwd", "a/../../x", "~/.ssh/id_rsa"]:
        reply = await runner.run("read_file", path=path)
        assert not reply.ok, path
    wrote = await runner.run("write_file", path="../escape.txt", content="x")
    assert not wrote.ok
    assert not (runner.workspace.parent / "escape.txt").exists()


async def test_describe_sandbox_reports_bwrap_and_bins(runner):
    reply = await runner.stub.DescribeSandbox(tool_runner_pb2.DescribeSandboxRequest())
    assert reply.backend == "bwrap" and not reply.insecure
    assert "sh" in reply.available_bins and "python3" in reply.available_bins


async def test_closing_a_session_twice_keeps_its_files_and_it_runs_again(runner):
    assert (await runner.sh("echo kept > note.txt", session="s1")).ok
    for session_id in ("s1", "s1", "never-used"):
        reply = await runner.stub.CloseSession(
            tool_runner_pb2.CloseSessionRequest(session_id=session_id)
        )
        assert reply == tool_runner_pb2.CloseSessionResponse()
    again = await runner.sh("cat note.txt", session="s1")
    assert again.ok and "kept" in again.output
