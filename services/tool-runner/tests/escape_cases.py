"""Escape attempts through the service's own API; each backend's suite runs all of them."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from .conftest import Runner, host_processes

Case = Callable[[Runner], Awaitable[None]]
CASES: dict[str, Case] = {}
HERE = Path(__file__).resolve()


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def exists(path: str | Path) -> bool:
    return os.path.lexists(path)


def spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv)


def py(code: str) -> str:
    return "python3 -c " + json.dumps(code).replace("$", "\\$")


@case
async def loopback_listener_of_the_host(r: Runner) -> None:
    accepted = []
    server = await asyncio.start_server(
        lambda _r, w: (accepted.append(1), w.close()), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('IN')"
        reply = await r.sh(py(code))
        assert reply.exit_code != 0 and "IN" not in reply.output
        await asyncio.sleep(0.05)
        assert accepted == [], "the sandbox reached a host loopback listener"
    finally:
        server.close()
        await server.wait_closed()


@case
async def dns_lookup(r: Runner) -> None:
    reply = await r.sh(py("import socket; print(socket.getaddrinfo('example.com', 80))"))
    assert reply.exit_code != 0 and "gaierror" in reply.output


@case
async def outside_address(r: Runner) -> None:
    # 192.0.2.1 is TEST-NET-1; with no route in an empty network namespace connect() fails at
    # once with ENETUNREACH, so no packet ever leaves.
    code = (
        "import socket; s = socket.socket(); s.settimeout(2); "
        "print('ERR', s.connect_ex(('192.0.2.1', 80)))"
    )
    reply = await r.sh(py(code))
    assert "ERR 101" in reply.output  # ENETUNREACH


@case
async def read_etc_shadow(r: Runner) -> None:
    reply = await r.sh("cat /etc/shadow")
    assert reply.exit_code != 0 and "root:" not in reply.output
    for path in ["/etc/shadow", "../../../../../etc/shadow"]:
        tool = await r.run("read_file", path=path)
        assert not tool.ok, path


@case
async def service_environment(r: Runner) -> None:
    secret = f"hunter2-{uuid.uuid4().hex}"
    os.environ["CRAYFISH_TEST_SECRET"] = secret
    try:
        reply = await r.sh("env; cat /proc/1/environ /proc/self/environ; ls /proc/*/environ")
        assert secret not in reply.output
        assert "CRAYFISH_TEST_SECRET" not in reply.output
    finally:
        del os.environ["CRAYFISH_TEST_SECRET"]


@case
async def service_files(r: Runner) -> None:
    here = HERE
    reply = await r.sh(f"cat {here}; ls {here.parent}; ls /work /root /home")
    assert reply.exit_code != 0 and "escape attempts through" not in reply.output
    tool = await r.run("read_file", path=str(here))
    assert not tool.ok


@case
async def write_outside_the_workspace(r: Runner) -> None:
    name = f"crayfish-escape-{uuid.uuid4().hex}"
    for target in [f"/usr/{name}", f"/etc/{name}", f"/{name}", f"/workspace/../{name}"]:
        reply = await r.sh(f"echo x > {target} && echo WROTE")
        assert "WROTE" not in reply.output, target
    reply = await r.sh(f"echo x > /tmp/{name} && echo WROTE")
    assert "WROTE" in reply.output and not exists(f"/tmp/{name}")
    tool = await r.run("write_file", path=f"/tmp/{name}", content="x")
    assert not tool.ok and not exists(f"/tmp/{name}")
    sysctl = await r.sh("echo 3 > /proc/sys/vm/drop_caches && echo WROTE; hostname pwned; hostname")
    assert "WROTE" not in sysctl.output
    assert os.uname().nodename != "pwned"


@case
async def symlinks_made_in_the_sandbox(r: Runner) -> None:
    await r.sh("ln -s / root; ln -s /etc/passwd pw; ln -s .. up; ln -s /tmp tmp")
    for tool, args in [
        ("read_file", {"path": "root/etc/passwd"}),
        ("read_file", {"path": "pw"}),
        ("read_file", {"path": f"up/{r.workspace.name}/pw"}),
        ("list_dir", {"path": "root"}),
        ("list_dir", {"path": "up"}),
        ("write_file", {"path": "tmp/crayfish-escape", "content": "x"}),
        ("write_file", {"path": "pw", "content": "x"}),
        ("edit_file", {"path": "pw", "old": "root", "new": "toor"}),
        ("read_spreadsheet", {"path": "root/etc/passwd.csv"}),
    ]:
        reply = await r.run(tool, **args)
        assert not reply.ok, (tool, args, reply.output)
    assert not exists("/tmp/crayfish-escape")
    listing = await r.run("list_dir")
    assert "root -> /" in listing.output


@case
async def hardlinks(r: Runner) -> None:
    reply = await r.sh("ln /usr/bin/env hl && echo LINKED; echo a > own; ln own twin && echo OK")
    assert "LINKED" not in reply.output and not exists(r.workspace / "hl")
    for tool, args in [
        ("read_file", {"path": "twin"}),
        ("write_file", {"path": "twin", "content": "x"}),
    ]:
        out = await r.run(tool, **args)
        assert not out.ok and "hard links" in out.output, tool


@case
async def dotdot_paths(r: Runner) -> None:
    for tool, args in [
        ("exec", {"command": "pwd", "workdir": "../.."}),
        ("read_file", {"path": "a/../../etc/passwd"}),
        ("list_dir", {"path": ".."}),
        ("write_file", {"path": "../../crayfish-escape", "content": "x"}),
    ]:
        reply = await r.run(tool, **args)
        assert not reply.ok, (tool, args)
    reply = await r.sh("cd /workspace/../.. && ls")
    assert r.workspace.name not in reply.output


@case
async def host_processes_are_invisible_and_unkillable(r: Runner) -> None:
    mark = f"{uuid.uuid4().int % 900 + 100}.{uuid.uuid4().int % 10**6:06d}"
    setpriv = shutil.which("setpriv") or "setpriv"
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    victim = spawn([*prefix, "sleep", mark] if os.geteuid() == 0 else ["sleep", mark])
    try:
        reply = await r.sh(f'ps -ef; kill -9 {victim.pid} && echo KIL""LED')
        assert f"sleep {mark}" not in reply.output and "KILLED" not in reply.output
        await r.sh("pkill -9 sleep; kill -9 -1")
        assert f" {os.getpid()} " not in reply.output
        await asyncio.sleep(0.1)
        assert victim.poll() is None, "a host process was killed from the sandbox"
    finally:
        victim.kill()
        victim.wait()


@case
async def privilege_tricks(r: Runner) -> None:
    reply = await r.sh(
        "unshare -U true && echo USERNS; mount -t tmpfs x /tmp && echo MOUNT; "
        "grep CapEff /proc/self/status; id -u"
    )
    assert "USERNS" not in reply.output and "MOUNT" not in reply.output
    assert "CapEff:\t0000000000000000" in reply.output
    assert reply.output.split()[-1] != "0"


@case
async def fork_bomb(r: Runner) -> None:
    mark = f"{uuid.uuid4().int % 900 + 100}.5"
    reply = await r.sh(f"b() {{ sleep {mark} & b & b; }}; b", timeout=3)
    assert reply.ok
    await asyncio.sleep(0.1)
    assert host_processes(mark) == []
    assert "alive" in (await r.sh("echo alive")).output


@case
async def memory_hog(r: Runner) -> None:
    reply = await r.sh(py("x = bytearray(3 * 1024**3); print('GOT', len(x))"), timeout=10)
    assert "GOT" not in reply.output and reply.exit_code != 0


# Six children, one after the other, each takes 300 MiB and keeps it; then the parent counts
# those still alive. Two cannot fit in the 512 MiB a command gets, so exactly one may be left.
MANY_HOGS = """
import os, signal, time
children = []
for i in range(6):
    held, holding = os.pipe()
    pid = os.fork()
    if pid == 0:
        block = bytearray(300 * 1024 * 1024)
        os.write(holding, b'x')
        time.sleep(60)
        os._exit(0)
    os.close(holding)
    os.read(held, 1)  # it holds its block, or it was killed
    children.append(pid)
time.sleep(0.5)
alive = [p for p in children if os.waitpid(p, os.WNOHANG) == (0, 0)]
print('HOLDING', len(alive), flush=True)
for p in alive:
    os.kill(p, signal.SIGKILL)
"""


@case
async def memory_hog_across_processes(r: Runner) -> None:
    # Each child stays under the per-process limit; together they are far over the total.
    await r.run("write_file", path="hogs.py", content=MANY_HOGS)
    reply = await r.sh("python3 hogs.py", timeout=20)
    assert reply.exit_code == 0 and reply.output.endswith("stdout:\nHOLDING 1\n"), reply.output


@case
async def cpu_loop(r: Runner) -> None:
    # 1.5 s of wall time comes before the 2 CPU-seconds limit: the timeout ends it.
    reply = await r.sh("while :; do :; done", timeout=1.5)
    assert json.loads(reply.result_json)["killed"] == "timeout" and reply.exit_code != 0
    assert "[timed out after 1.5s; the whole process tree was killed]" in reply.output


@case
async def giant_output(r: Runner) -> None:
    reply = await r.sh("head -c 50000000 /dev/zero | tr '\\0' x", timeout=20)
    assert reply.truncated and len(reply.output) < 50_000


@case
async def orphan_processes(r: Runner) -> None:
    mark = f"{uuid.uuid4().int % 900 + 100}.25"
    await r.sh(f"(setsid sh -c 'sleep {mark}' &) ; (nohup sleep {mark} &) ; echo bye")
    await r.sh(f"sleep {mark}", timeout=0.5)
    await asyncio.sleep(0.1)
    assert host_processes(mark) == []
