"""What each simple command runs: wrappers (`env`, `nice`, `timeout`, `xargs`, `sh -c` …) are
seen through, the program is resolved the way the sandbox's shell would find it, and shell
builtins that run code the policy cannot see (eval, source, alias …) are named as such."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.approvals.filters import is_stdin_filter
from orchestrator.approvals.shell import ParsedLine, SimpleCommand, Word, parse_line

# The sandbox's PATH (tool_runner.sandbox.base.SANDBOX_PATH; a test keeps the two equal).
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_ROOT = "/workspace"
MAX_DEPTH = 4  # `sh -c` inside `sh -c` …: deeper nesting needs a person
# A program name as typed (once unquoted); anything else ({a,b}, globs, $'…') needs a person.
_PLAIN_PROGRAM = re.compile(r"^[A-Za-z0-9._+/@%,:-]+$")

# Builtins that run no program and no hidden code.
HARMLESS_BUILTINS = frozenset(
    "cd pushd popd echo printf true false : test [ pwd read shift exit return wait umask "
    "unset set export local readonly declare typeset type break continue times getopts".split()
)
# Builtins that run shell code or change how later names resolve.
CODE_BUILTINS = frozenset("eval source . alias trap builtin hash enable fc let".split())
MOVES = ("cd", "pushd", "popd")  # after these, a relative program path means another file
SHELLS = frozenset("sh bash dash zsh ksh mksh ash rbash".split())
# Variables that make a program run code it was not asked to (or change PATH lookup).
RISKY_VARIABLES = re.compile(
    r"^(PATH|BASH_ENV|ENV|SHELLOPTS|BASHOPTS|IFS|PS4|PROMPT_COMMAND|LD_\w*|GCONV_PATH|"
    r"PYTHON\w*|PERL5\w*|PERLLIB|RUBYOPT|RUBYLIB|NODE_OPTIONS|GIT_\w*|EDITOR|VISUAL|PAGER|"
    r"LESSOPEN|LESSCLOSE|BROWSER|TERMINFO|LOCPATH|NLSPATH|HOSTALIASES|MANPAGER)$"
)


@dataclass(frozen=True)
class Segment:
    """One program the line runs: as typed, resolved (None: not found), and why it needs a
    person even when allowlisted (`problem`), or `free` when it needs no allowlist entry."""

    typed: str
    resolved: str | None = None
    problem: str = ""
    free: bool = False


@dataclass
class Analysis:
    segments: list[Segment]
    problems: list[str]


Which = Callable[[str], str | None]


def sandbox_which(name: str) -> str | None:
    """The sandbox shell's answer for `name` on its PATH (its folders mirror this host's)."""
    for folder in SANDBOX_PATH.split(":"):
        candidate = os.path.join(os.path.realpath(folder), name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def analyse(
    command: str, workdir: str = "", which: Which = sandbox_which, env: dict[str, str] | None = None
) -> Analysis:
    """The programs a command line runs (as `sh -c` in the sandbox, in `workdir`)."""
    reader = _Reader(sandbox_workdir(workdir), which)
    for name in env or {}:
        if RISKY_VARIABLES.match(name):
            reader.problems.append(f"the call sets {name}, which changes what programs run")
    reader.read(command, 0)
    return Analysis(reader.segments, reader.problems)


class _Reader:
    def __init__(self, cwd: str, which: Which):
        self.cwd = cwd
        self.which = which
        self.segments: list[Segment] = []
        self.problems: list[str] = []
        self.moves = False  # the line changes folder: relative program paths are unknowable

    def read(self, command: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            self.problems.append(f"shells nested more than {MAX_DEPTH} deep")
            return
        parsed: ParsedLine = parse_line(command)
        self.problems.extend(parsed.problems)
        self.moves = self.moves or any(_first(c.words) in MOVES for c in parsed.commands)
        for simple in parsed.commands:
            self.command(simple, depth)

    def command(self, simple: SimpleCommand, depth: int) -> None:
        for assignment in simple.assignments:
            name = assignment.split("=", 1)[0]
            if RISKY_VARIABLES.match(name):
                self.problems.append(f"it sets {name}, which changes what programs run")
        if simple.words:
            self.words(list(simple.words), depth)

    def words(self, words: list[Word], depth: int) -> None:
        head = words[0]
        name = head.text
        if name is None or not _PLAIN_PROGRAM.match(name):
            self.segments.append(Segment(head.source, problem="the program is not a plain word"))
            return
        if name in CODE_BUILTINS:
            self.segments.append(Segment(name, problem=f"`{name}` runs code the policy cannot see"))
            return
        if name in HARMLESS_BUILTINS:
            self._builtin(name, words[1:])
            return
        inner = unwrap(name, words[1:])
        if isinstance(inner, str):
            self.segments.append(Segment(name, self.resolve(name), inner))
            return
        if inner is not None:
            if inner:
                self.words(inner, depth)
            elif name in ("exec", "command"):  # `exec >log`: redirections only, no program
                self.segments.append(Segment(name, free=True))
            else:
                self._program(name, words[1:])
            return
        if name in SHELLS or os.path.basename(name) in SHELLS:
            self._shell(head, words[1:], depth)
            return
        self._program(name, words[1:])
        self._find_exec(name, words[1:], depth)

    def _builtin(self, name: str, args: list[Word]) -> None:
        if name in ("export", "declare", "typeset", "readonly", "local"):
            for arg in args:
                if arg.text is None or RISKY_VARIABLES.match(arg.text.split("=", 1)[0]):
                    self.problems.append(f"`{name} {arg.source}` may change what programs run")
        self.segments.append(Segment(name, free=True))

    def _program(self, name: str, args: list[Word]) -> None:
        resolved = self.resolve(name)
        free = resolved is not None and is_stdin_filter(os.path.basename(name), args)
        problem = "" if resolved else "not found on the sandbox's PATH"
        if "/" in name and not name.startswith("/") and self.moves:
            resolved, problem = None, "a relative path after `cd`"
        self.segments.append(Segment(name, resolved, problem, free))

    def resolve(self, name: str) -> str | None:
        if "/" not in name:
            return self.which(name)
        path = os.path.normpath(os.path.join(self.cwd, name))
        if path.startswith(SANDBOX_ROOT + "/"):
            return path
        # The system folders are this host's (the sandbox binds them): /bin/ls is /usr/bin/ls.
        return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))

    def _shell(self, head: Word, args: list[Word], depth: int) -> None:
        script = shell_script(args)
        if script is None:
            problem = "a shell reading a script file or its input"
            self.segments.append(Segment(head.source, self.resolve(head.text or ""), problem))
            return
        self.read(script, depth + 1)

    def _find_exec(self, name: str, args: list[Word], depth: int) -> None:
        if os.path.basename(name) != "find":
            return
        for index, arg in enumerate(args):
            if arg.text in ("-exec", "-execdir", "-ok", "-okdir"):
                self.moves = self.moves or arg.text in ("-execdir", "-okdir")
                rest = args[index + 1 :]
                end = next((i for i, w in enumerate(rest) if w.text in (";", "+")), len(rest))
                if end:
                    self.words(rest[:end], depth)


def _first(words: tuple[Word, ...]) -> str | None:
    return words[0].text if words else None


def shell_script(args: list[Word]) -> str | None:
    """The command string of `sh [options] -c STRING …`; None for anything else."""
    has_c, index, text = False, 0, None
    while index < len(args):
        text = args[index].text
        if text is None:
            return None
        if text in ("-o", "+o", "-O", "+O"):
            index += 2
            continue
        if text == "--" or not text.startswith(("-", "+")) or text in ("-", "+"):
            break
        if text.startswith("--"):
            if text in ("--rcfile", "--init-file"):
                return None
        elif "c" in text[1:]:
            has_c = True
        index += 1
    if text == "--":
        index += 1
    if not has_c or index >= len(args):
        return None
    return args[index].text


# Wrappers that run the rest of their arguments as a command: options taking a value.
_WRAPPER_VALUES: dict[str, tuple[frozenset[str], int]] = {
    # name: (options that take a value, positionals before the command)
    "env": (frozenset({"-u", "--unset"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "command": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "time": (frozenset({"-f", "--format", "-o", "--output"}), 0),
    "ionice": (frozenset({"-c", "--class", "-n", "--classdata", "-p", "-P", "-u"}), 0),
    "chrt": (frozenset(), 1),
    "taskset": (frozenset(), 1),
    "xargs": (
        frozenset(
            "-a --arg-file -d --delimiter -E -e --eof -I -i --replace -L -l --max-lines "
            "-n --max-args -P --max-procs -s --max-chars --process-slot-var".split()
        ),
        0,
    ),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    "doas": (frozenset({"-u", "-C"}), 0),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U"}), 0),
}
# Options that make the wrapper run something we cannot see (env -S splits a string).
# (-C runs it in another folder: a relative program path would name another file.)
_WRAPPER_OPAQUE = {"env": ("-S", "--split-string", "-C", "--chdir")}


def unwrap(name: str, args: list[Word]) -> list[Word] | str | None:
    """The command a wrapper runs ([] when it runs none: the wrapper is then the program), or
    why it cannot be seen through; None when `name` is no wrapper."""
    base = os.path.basename(name)
    if base not in _WRAPPER_VALUES:
        return None
    valued, positionals = _WRAPPER_VALUES[base]
    index = 0
    while index < len(args):
        text = args[index].text
        if text is None:
            return args[index:]  # a non-literal program: judged (and refused) as one
        if text == "--":
            index += 1
            break
        if any(text.startswith(o) for o in _WRAPPER_OPAQUE.get(base, ())):
            return f"`{base} {text}` runs a command the policy cannot see"
        if base == "env" and "=" in text and not text.startswith("-"):
            if RISKY_VARIABLES.match(text.split("=", 1)[0]):
                return f"`env {text}` changes what programs run"
            index += 1
            continue
        if not text.startswith("-") or text == "-":
            break
        index += 2 if text in valued else 1
    return args[index + positionals :]


def sandbox_workdir(workdir: str) -> str:
    """The working folder inside the sandbox for a workspace-relative one."""
    return os.path.normpath(os.path.join(SANDBOX_ROOT, workdir or "."))
