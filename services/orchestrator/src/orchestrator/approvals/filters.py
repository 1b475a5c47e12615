"""Stdin-only tools: filters that read their input and write their output, and may run without
an allowlist entry while they are used that way (no file arguments, no option that writes a
file, reads one, or runs a program)."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.approvals.shell import Word


@dataclass(frozen=True)
class Filter:
    positionals: int  # arguments that are not files (a pattern, a jq program, tr's sets)
    valued: frozenset[str]  # options followed by a value
    refused: frozenset[str]  # options that touch files or run programs (short: one letter)


def _f(positionals: int, valued: str = "", refused: str = "") -> Filter:
    return Filter(positionals, frozenset(valued.split()), frozenset(refused.split()))


FILTERS: dict[str, Filter] = {
    "jq": _f(
        1,
        "--indent --tab-width",
        "-f --from-file --rawfile --slurpfile -L --args --jsonargs --arg --argjson",
    ),
    "grep": _f(
        1,
        "-e -m -A -B -C --regexp --max-count --context --label",
        "-f --file -r -R --recursive --dereference-recursive -d --directories -D --devices",
    ),
    "egrep": _f(1, "-e -m -A -B -C", "-f --file -r -R --recursive -d -D"),
    "fgrep": _f(1, "-e -m -A -B -C", "-f --file -r -R --recursive -d -D"),
    "sort": _f(
        0,
        "-k -t -S --key --field-separator --buffer-size --parallel",
        "-o --output -T --temporary-directory --compress-program --files0-from --random-source",
    ),
    "head": _f(0, "-n -c --lines --bytes"),
    "tail": _f(0, "-n -c --lines --bytes -s --sleep-interval", "--pid"),
    "wc": _f(0, "", "--files0-from"),
    "cut": _f(0, "-d -f -c -b --delimiter --fields --characters --bytes --output-delimiter"),
    "tr": _f(2),
    "uniq": _f(0, "-f -s -w --skip-fields --skip-chars --check-chars"),
    "rev": _f(0),
    "tac": _f(0, "-s --separator"),
    "nl": _f(0, "-b -d -f -h -i -l -n -s -v -w"),
    "fold": _f(0, "-w --width"),
    "base64": _f(0, "-w --wrap"),
}


def is_stdin_filter(name: str, args: tuple[Word, ...] | list[Word]) -> bool:
    """Whether `name args` is a known filter used on its input alone."""
    rule = FILTERS.get(name)
    if rule is None:
        return False
    positionals, index, options_done = 0, 0, False
    while index < len(args):
        text = args[index].text
        if text is None:
            return False
        if not options_done and text == "--":
            options_done = True
        elif not options_done and text.startswith("-") and text != "-":
            if _refused(text, rule):
                return False
            index += 1 if "=" in text or text not in rule.valued else 2
            continue
        else:
            positionals += 1
        index += 1
    return positionals <= rule.positionals


def _refused(option: str, rule: Filter) -> bool:
    if option.startswith("--"):
        return option.split("=", 1)[0] in rule.refused
    # A cluster of short options (-rn): any refused letter refuses it; a valued letter ends it.
    for letter in option[1:]:
        if f"-{letter}" in rule.refused:
            return True
        if f"-{letter}" in rule.valued:
            return False
    return False
