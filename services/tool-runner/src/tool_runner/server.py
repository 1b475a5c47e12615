"""Wires settings, workspace, sandbox and servicer into the shared gRPC server."""

from __future__ import annotations

import logging

import grpc
from crayfish.tool_runner.v1 import tool_runner_pb2_grpc
from crayfish_common.grpc_server import GrpcService, serve

from tool_runner.config import ToolRunnerSettings
from tool_runner.fsafe import Workspace
from tool_runner.prepare import prepare_workspace
from tool_runner.sandbox.base import Sandbox
from tool_runner.servicer import SERVICE_NAME, ToolRunnerServicer
from tool_runner.tools import ToolBox

log = logging.getLogger(__name__)


def make_sandbox(settings: ToolRunnerSettings, workspace: Workspace) -> Sandbox:
    """The configured backend (not yet started); never a weaker one than asked for."""
    uid, gid = (settings.sandbox_uid, settings.sandbox_gid) if settings.is_root else (None, None)
    chunk = (settings.stream_chunk_bytes, settings.stream_interval)
    if settings.sandbox == "bwrap":
        from tool_runner.sandbox.bwrap import BwrapSandbox

        return BwrapSandbox(
            workspace.root,
            settings.data_dir,
            uid,
            gid,
            settings.tmp_size_mb,
            chunk,
            settings.skill_roots,
        )
    if settings.sandbox == "docker":
        from tool_runner.sandbox.docker import DockerSandbox

        return DockerSandbox(settings, workspace.root, chunk)
    from tool_runner.sandbox.none import NoSandbox

    return NoSandbox(workspace.root, uid, gid, chunk, settings.skill_roots)


async def build_toolbox(settings: ToolRunnerSettings) -> ToolBox:
    """Prepares the workspace and starts the sandbox; raises SandboxUnavailable if it cannot."""
    owner = (settings.sandbox_uid, settings.sandbox_gid) if settings.is_root else None
    root = prepare_workspace(settings.workspace, owner, settings.chown_workspace)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    workspace = Workspace(root, owner)
    sandbox = make_sandbox(settings, workspace)
    await sandbox.start()
    return ToolBox(settings, workspace, sandbox)


def registrar(toolbox: ToolBox):  # type: ignore[no-untyped-def]
    def register(server: grpc.aio.Server) -> None:
        tool_runner_pb2_grpc.add_ToolRunnerServiceServicer_to_server(
            ToolRunnerServicer(toolbox), server
        )

    return register


async def start_service(settings: ToolRunnerSettings) -> tuple[GrpcService, ToolBox]:
    """A started server (tests use port 0) and its toolbox."""
    toolbox = await build_toolbox(settings)
    service = GrpcService([SERVICE_NAME], [registrar(toolbox)])
    await service.start(settings.listen_address)
    return service, toolbox


async def run(settings: ToolRunnerSettings) -> None:
    toolbox = await build_toolbox(settings)
    log.info("sandbox %s; workspace %s", toolbox.sandbox.name, toolbox.ws.root)
    await serve(settings, [SERVICE_NAME], [registrar(toolbox)], on_shutdown=toolbox.sandbox.stop)
