"""Bad input at every edge: generated requests for every documented operation, bad tool calls."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup

from devstack.launcher import LocalStack
from tests.fakes import FakeLLM, Reply
from tests.stacks import print_figures, wait_task

pytestmark = pytest.mark.slow

API_TOKEN = "fault-suite-token"
AUTH = {"Authorization": f"Bearer {API_TOKEN}"}
SECRETS = ("sk-test-secret", API_TOKEN)  # the provider key and the API token: never in a response
EXAMPLES = 30  # per operation and generation mode
# A never-ending stream (every task's events): a request to it only ends by timing out.
UNBOUNDED = {"GET /api/events"}
# A long poll: a request with a good `wait` is held that long (up to 60 s), whatever else it
# holds, so none are generated (services/orchestrator/tests/test_channel_replies_shown.py sends
# it bad ones); it is still asked without the token.
HELD = {"GET /api/channels/{channel}/owed"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
SKILL_MD = """---
name: weather-report
description: Write a short weather report for a city from a forecast file.
---
# Weather report
Read `forecast.json`, then write three sentences.
"""

STACK_FILES = {"MEMORY.md": "# Memory\n- Ada plays the cello.\n", "skills/w/SKILL.md": SKILL_MD}
FIGURES: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """Prints this module's figures at its end, past pytest's output capture."""
    yield
    line = ", ".join(f"{name}: {count}" for name, count in FIGURES.items())
    print_figures(request, [f"\nbad input: {line}"])


def operations(stack: LocalStack) -> list[Any]:
    # 413 (too large) and 415 (wrong media type) are rejections too.
    rejected = ["400", "401", "404", "405", "409", "413", "415", "422"]
    config = schemathesis.Config.from_dict(
        {"checks": {"negative_data_rejection": {"expected-statuses": rejected}}}
    )
    url = f"{stack.url}/openapi.json"
    schema = schemathesis.openapi.from_url(url, headers=AUTH, config=config)
    found = [result.ok() for result in schema.get_all_operations()]
    return [op for op in found if f"{op.method.upper()} {op.path}" not in UNBOUNDED]


def exercise(operation: Any, mode: GenerationMode, base_url: str, problems: list[str]) -> None:
    """Sends EXAMPLES generated requests; records each check failure and what answered."""
    label = f"{operation.method.upper()} {operation.path}"
    checks = [*CHECKS, negative_data_rejection] if mode is GenerationMode.NEGATIVE else CHECKS
    session = requests.Session()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def send(case: schemathesis.Case) -> None:
        response = case.call(base_url=base_url, session=session, headers=AUTH, timeout=30)
        FIGURES[f"{mode.value} requests"] += 1
        FIGURES[f"{mode.value} answered {response.status_code // 100}xx"] += 1
        leaked = [s for s in SECRETS if s in response.text]
        if leaked:
            problems.append(f"{label}: response holds a secret ({len(leaked)})")
        try:
            case.validate_response(response, checks=checks, headers=AUTH)
        except FailureGroup as group:
            sent = {"path": case.path_parameters, "query": case.query, "body": case.body}
            for failure in group.exceptions:
                problems.append(
                    f"{label} [{mode.value}] -> {response.status_code}: {failure.title} "
                    f"{response.text[:200]!r} for {repr(sent)[:300]}"
                )

    try:
        send()
    except Unsatisfiable:  # nothing about the operation can be invalid (no parameters, no body)
        assert mode is GenerationMode.NEGATIVE, label


def without_token(ops: list[Any], base_url: str) -> list[str]:
    """One request per operation with no token: each must be refused with a JSON 401."""
    problems = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for op in ops:
            if op.path == "/healthz":
                continue  # liveness is open by design
            path = op.path.replace("{", "").replace("}", "")  # any value will do
            response = client.request(op.method.upper(), path)
            FIGURES["requests without the token"] += 1
            if response.status_code != 401 or "error" not in response.json():
                problems.append(f"{op.method.upper()} {op.path} without a token: {response}")
            else:
                FIGURES["requests without the token answered 401"] += 1
    return problems


def test_generated_requests_get_no_5xx_and_answers_match_the_schema(
    stack: LocalStack, fake_llm: FakeLLM
):
    fake_llm.reply_forever_text("ok")  # turns that generated requests start end at once
    ops = operations(stack)
    assert len(ops) >= 15, [f"{op.method} {op.path}" for op in ops]
    problems: list[str] = []
    for operation in ops:
        if f"{operation.method.upper()} {operation.path}" in HELD:
            continue
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            exercise(operation, mode, stack.url, problems)
    FIGURES["operations"] = len(ops)
    FIGURES["secrets leaked"] += sum("secret" in p for p in problems)
    problems += without_token(ops, stack.url)
    unique = sorted(set(problems))
    assert not unique, f"{len(unique)} problem(s):\n" + "\n".join(unique[:40])


# -- malformed tool calls from the model ------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
BAD_CALLS = [
    ("malformed JSON", "exec", '{"command": "echo hi"', "not valid JSON"),
    ("a JSON array", "exec", '["echo", "hi"]', "must be a JSON object"),
    ("JSON null", "exec", "null", "must be a JSON object"),
    ("a number for a string", "exec", {"command": 42}, "42 is not of type 'string'"),
    ("a missing required field", "exec", {"cmd": "ls"}, "'command' is a required property"),
    ("an unknown tool", "rm_everything", {"path": "/"}, "unknown tool `rm_everything`"),
    ("deeply nested JSON", "exec", DEEP, "nested too deeply"),
    ("a lone surrogate", "exec", '{"command": "echo \\ud800"}', "not valid Unicode"),
    ("a 5,000-digit number", "exec", '{"timeout": ' + "9" * 5000 + "}", "not usable JSON"),
    ("a 200 kB command", "exec", {"command": "echo " + "a" * 200_000}, "at most 131071"),
    ("a 2 MB file", "write_file", {"path": "big.txt", "content": "b" * 2_000_000}, "created"),
]


@pytest.fixture
def controls_undone(api: httpx.Client) -> None:
    """No daily cap and no exec approvals: the generated requests above may have set any (a cap
    of 0 tokens refuses every turn with 429; a policy may deny `exec`)."""
    budget = {"daily_tokens": None, "daily_usd": None}
    budget |= {"background_daily_tokens": None, "background_daily_usd": None}
    assert api.put("/api/usage/budget", json=budget).status_code == 200
    policy = {"security": "full", "ask": "off", "ask_fallback": "deny", "allowlist": []}
    assert api.put("/api/approvals/policy", json=policy).status_code == 200


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
@pytest.mark.usefixtures("controls_undone")
def test_malformed_tool_calls_give_the_model_a_readable_error(
    api: httpx.Client, fake_llm: FakeLLM, tool: str, arguments: dict[str, Any] | str, expected: str
):
    fake_llm.reply_tool_calls((tool, arguments))
    fake_llm.reply_with(lambda body: Reply(text="seen: " + body["messages"][-1]["content"]))
    FIGURES["malformed or huge tool calls"] += 1
    accepted = api.post("/api/chat", json={"message": "go"})
    task = wait_task(api, accepted.json()["task_id"], timeout=60)
    assert task["status"] == "completed", task["error"]
    seen = task["result"].removeprefix("seen: ")
    assert expected in seen, seen[:500]
    assert len(seen) < 50_000  # the error does not echo a huge argument back in full
    FIGURES["malformed or huge tool calls answered (diagnostic or done)"] += 1
    history = api.get(f"/api/sessions/{task['session_id']}").json()["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2]["content"] == seen  # the stored history holds what the model was told


def test_no_secret_reaches_a_log_or_a_data_file(stack: LocalStack):
    """Runs after the others: nothing they sent put the provider key or the token on disk."""
    assert stack.log_dir is not None
    files = [*stack.log_dir.glob("*.log"), *(p for p in stack.data_dir.rglob("*") if p.is_file())]
    found = [(p.name, s) for p in files for s in SECRETS if s.encode() in p.read_bytes()]
    FIGURES["secrets leaked"] += len(found)
    assert not found
