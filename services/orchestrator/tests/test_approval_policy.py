"""The exec policy judged on real command lines: bypass attempts (chaining, substitution,
quoting, aliases, wrappers, shells in shells) never run an unlisted program without a person."""

from __future__ import annotations

import pytest
from orchestrator.approvals.policy import (
    ExecPolicy,
    PolicyInvalid,
    fallback,
    judge,
    policy_from_json,
)
from orchestrator.approvals.programs import SANDBOX_PATH, analyse, sandbox_which
from tool_runner.sandbox.base import SANDBOX_PATH as TOOL_RUNNER_PATH

ALLOWLIST = ExecPolicy("allowlist", "on-miss", "deny", ("/usr/bin/ls", "/usr/bin/git"))

# (attempt, what the allowlist policy says) with ls and git allowlisted, rm not.
BYPASSES = [
    ("ls -la", "allow"),
    ("ls && rm -rf x", "ask"),
    ("ls || rm -rf x", "ask"),
    ("ls; rm -rf x", "ask"),
    ("ls | rm -rf x", "ask"),
    ("ls\nrm -rf x", "ask"),
    ("ls & rm -rf x", "ask"),
    ("{ ls; rm x; }", "ask"),
    ("(ls; rm x)", "ask"),
    ("if ls; then rm x; fi", "ask"),
    ("for f in a; do rm $f; done", "ask"),
    ("while ls; do rm x; done", "ask"),
    ("echo $(rm x)", "ask"),
    ("echo `rm x`", "ask"),
    ("ls $(git log)", "ask"),
    ("cat <(rm x)", "ask"),
    ("ls > >(rm x)", "ask"),
    ("'r''m' -rf x", "ask"),
    ('"rm" -rf x', "ask"),
    ("r\\m -rf x", "ask"),
    ("$'\\x72m' x", "ask"),
    ("/usr/bin/rm x", "ask"),
    ("/bin/rm x", "ask"),
    ("/usr/bin/../bin/rm x", "ask"),
    ("./rm x", "ask"),
    ("cd /usr/bin && ./rm x", "ask"),
    ("X=rm; $X x", "ask"),
    ('"$X" x', "ask"),
    ("${X} x", "ask"),
    ("~/rm x", "ask"),
    ("l? -la", "ask"),
    ("{rm,x}", "ask"),
    ("alias ls=rm\nls x", "ask"),
    ("ls() { rm x; }; ls", "ask"),
    ("eval 'rm x'", "ask"),
    (". ./script.sh", "ask"),
    ("source script.sh", "ask"),
    ("trap 'rm x' EXIT; ls", "ask"),
    ("hash -p /usr/bin/rm ls; ls x", "ask"),
    ("env rm x", "ask"),
    ("env -i FOO=1 rm x", "ask"),
    ("env -S 'rm x'", "ask"),
    ("env PATH=/workspace ls", "ask"),
    ("PATH=/workspace ls", "ask"),
    ("export PATH=/workspace; ls", "ask"),
    ("BASH_ENV=evil.sh bash -c ls", "ask"),
    ("bash -c 'rm x'", "ask"),
    ("sh -c 'ls; rm x'", "ask"),
    ("sh -ec 'rm x'", "ask"),
    ("bash -c \"bash -c 'rm x'\"", "ask"),
    ("/bin/sh -c 'rm x'", "ask"),
    ("bash script.sh", "ask"),
    ("echo rm x | sh", "ask"),
    ("xargs rm < list", "ask"),
    ("ls | xargs -n 1 rm", "ask"),
    ("nice -n 5 rm x", "ask"),
    ("timeout 5 rm x", "ask"),
    ("timeout -s KILL 5 rm x", "ask"),
    ("command rm x", "ask"),
    ("command -p rm x", "ask"),
    ("exec rm x", "ask"),
    ("nohup rm x", "ask"),
    ("nice timeout 3 env xargs rm", "ask"),
    ("find . -exec rm {} ;", "ask"),
    ("git log | sort | head -n 3", "allow"),
    ("git log | grep -i fix | wc -l", "allow"),
    ("git log | jq -r .x", "allow"),
    ("sort -o out.txt", "ask"),
    ("grep -r secret", "ask"),
    ("grep secret notes.txt", "ask"),
    ("sort --compress-program=rm", "ask"),
    ("timeout 5 ls", "allow"),
    ("bash -c 'ls && git status'", "allow"),
    ("X=1 ls", "allow"),
    ("cd sub && ls > out.txt", "allow"),
    ("case x in y) rm x;; esac", "ask"),
    ("echo $((1+2))", "ask"),
    ("ls '", "ask"),
    ("r\\\nm x", "ask"),
    ("ls <<EOF\nrm x\nEOF", "allow"),
    ("sh <<< 'rm x'", "ask"),
    ('set -- rm x; "$@"', "ask"),
    ("IFS=/ ls", "ask"),
    ("coproc rm x", "ask"),
    ("exec >log.txt; ls", "allow"),
    ("xargs -I{} sh -c 'rm {}'", "ask"),
    ("busybox rm x", "ask"),
    ("time rm x", "ask"),
    ("! rm x", "ask"),
    ("env -C /workspace/a/b ../../usr/bin/ls", "ask"),
    ("env --chdir=/tmp ls", "ask"),
    ("cd a/b; ../../usr/bin/ls", "ask"),
    ("pushd a/b; ../../usr/bin/ls", "ask"),
    ("find a -execdir ../../usr/bin/ls ;", "ask"),
    ("../usr/bin/ls", "allow"),
    ("ls &>/dev/null rm x", "ask"),
    ("ls &>>log rm x", "ask"),
    ("((rm x))", "ask"),
    ("ls 2>&1 | head", "allow"),
]


@pytest.mark.parametrize(("attempt", "expected"), BYPASSES)
def test_bypass_attempts_need_a_person(attempt: str, expected: str) -> None:
    verdict = judge(ALLOWLIST, analyse(attempt))
    assert verdict.action == expected, verdict.reason


def test_with_ask_off_a_miss_is_denied_with_its_reason() -> None:
    policy = ExecPolicy("allowlist", "off", "deny", ("/usr/bin/ls",))
    verdict = judge(policy, analyse("ls && rm x"))
    assert verdict.action == "deny"
    assert verdict.reason == "/usr/bin/rm is not in the allowlist"
    assert verdict.missing == ("/usr/bin/rm",)


def test_security_modes() -> None:
    line = analyse("rm -rf x")
    assert judge(ExecPolicy("full", "on-miss"), line).action == "allow"
    assert judge(ExecPolicy("full", "always"), line).action == "ask"
    assert judge(ExecPolicy("deny", "always"), line).action == "deny"
    listed = ExecPolicy("allowlist", "always", "deny", ("/usr/bin/rm",))
    assert judge(listed, line).action == "ask"


def test_globs_allow_a_folder_of_programs() -> None:
    policy = ExecPolicy("allowlist", "off", "deny", ("/usr/bin/*",))
    assert judge(policy, analyse("rm x && git status")).action == "allow"
    assert judge(policy, analyse("/workspace/tool.sh")).action == "deny"


@pytest.mark.parametrize("entry", ["*", "/workspace/*", "/workspace/tool.sh", "/tmp/*"])
def test_no_entry_allows_a_program_the_sandbox_can_write(entry: str) -> None:
    policy = ExecPolicy("allowlist", "on-miss", "deny", (entry,))
    for line in ("./tool.sh", "/workspace/tool.sh", "/tmp/tool.sh", "cd /tmp; /tmp/tool.sh"):
        verdict = judge(policy, analyse(line))
        assert verdict.action == "ask", (entry, line)
        assert verdict.missing == ()  # allow-always adds nothing that could never count


def test_wrappers_resolve_to_the_wrapped_program() -> None:
    segments = analyse("nice -n 5 timeout -k 1 3 env -i A=1 git status").segments
    assert [s.resolved for s in segments] == [sandbox_which("git")]


def test_relative_programs_resolve_in_the_working_folder() -> None:
    segments = analyse("./build.sh", workdir="proj").segments
    assert segments[0].resolved == "/workspace/proj/build.sh"
    escaped = analyse("../../usr/bin/rm x", workdir="proj").segments
    assert escaped[0].resolved == "/usr/bin/rm"


def test_a_call_setting_a_risky_variable_needs_a_person() -> None:
    verdict = judge(ALLOWLIST, analyse("ls", env={"LD_PRELOAD": "/workspace/x.so"}))
    assert verdict.action == "ask"
    assert "LD_PRELOAD" in verdict.reason


def test_unanswered_questions_take_the_fallback() -> None:
    line = analyse("rm x")
    assert fallback(ExecPolicy("allowlist", "on-miss", "deny"), line).action == "deny"
    assert fallback(ExecPolicy("allowlist", "on-miss", "full"), line).action == "allow"
    listed = ExecPolicy("allowlist", "always", "allowlist", ("/usr/bin/rm",))
    assert fallback(listed, line).action == "allow"
    assert fallback(ExecPolicy("allowlist", "on-miss", "allowlist"), line).action == "deny"


def test_allow_always_adds_the_missing_programs() -> None:
    verdict = judge(ALLOWLIST, analyse("ls | xargs rm"))
    widened = ALLOWLIST.with_entries(list(verdict.missing))
    assert judge(widened, analyse("ls | xargs rm")).action == "allow"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"security": "open"}, "security"),
        ({"ask": "sometimes"}, "ask"),
        ({"ask_fallback": "ask"}, "ask_fallback"),
        ({"allowlist": "/usr/bin/ls"}, "allowlist"),
        ({"allowlist": ["ls"]}, "allowlist[0]"),
        ({"allowlist": ["/usr/bin/ls", "/usr/bin/a b"]}, "allowlist[1]"),
        ({"allowlist": [3]}, "allowlist[0]"),
        ({"mode": "full"}, "mode"),
        ([], "policy"),
    ],
)
def test_invalid_policies_name_the_field(body: object, field: str) -> None:
    with pytest.raises(PolicyInvalid) as caught:
        policy_from_json(body)
    assert caught.value.field == field


def test_a_partial_policy_keeps_the_other_fields() -> None:
    base = ExecPolicy("allowlist", "always", "full", ("/usr/bin/ls",))
    changed = policy_from_json({"ask": "off"}, base)
    assert changed == ExecPolicy("allowlist", "off", "full", ("/usr/bin/ls",))


def test_the_sandbox_path_is_the_tool_runners() -> None:
    assert SANDBOX_PATH == TOOL_RUNNER_PATH


def test_a_linked_system_folder_resolves_like_a_bare_name() -> None:
    assert analyse("/bin/ls").segments[0].resolved == sandbox_which("ls")


def test_find_execdir_runs_relative_programs_elsewhere() -> None:
    policy = ExecPolicy("allowlist", "on-miss", "deny", ("/usr/bin/ls", "/usr/bin/find"))
    assert judge(policy, analyse("find a -exec ls {} ;")).action == "allow"
    assert judge(policy, analyse("find a -execdir ../../usr/bin/ls ;")).action == "ask"
    assert judge(policy, analyse("find a -exec ../usr/bin/ls ;")).action == "allow"
