"""Judge the warnings in an Ansible run's output: ours fail, a dependency's are named.

    python3 tests/harness/warning-gate.py LOG ROOT

LOG is the output of ansible-playbook runs (colour codes allowed), ROOT the
checkout. A newcomer reads any warning as a bug, so:

- every [WARNING] fails, except ansible-core's note that deprecation
  warnings can be switched off, which comes with any deprecation and is
  judged with them;
- a [DEPRECATION WARNING] fails when it comes from one of our files: its
  "Origin:" is in ROOT (or in the collection's link to it), a traceback's
  innermost file that is not ansible-core's own is ours, or the module it
  says is deprecated (`Importing 'to_text' from 'ansible.module_utils._text'`,
  "The `ansible.module_utils.six` module is deprecated") is imported by one of
  our Python files;
- a deprecation raised by a dependency's code (an Origin or a traceback file
  outside ROOT; an import no file of ours makes) is tolerated and printed
  as such, with where it comes from;
- a deprecation nothing attributes fails: it cannot be shown not to be ours.

Exit status 0 when nothing fails, 1 otherwise; the verdicts go to stdout.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MESSAGE_START = re.compile(r"^\[(WARNING|DEPRECATION WARNING)\]: ?(.*)$")
# Lines that end a message's continuation: Ansible's own output resumes.
MESSAGE_END = re.compile(r"^(\[[A-Z ]+\]:|TASK \[|PLAY |RUNNING HANDLER \[|PLAY RECAP|ok: |changed: |skipping: |fatal: |included: |failed: |\S+\s+: ok=)")
ORIGIN = re.compile(r"^Origin: (\S+?)(?::\d+(?::\d+)?)?$")
TRACEBACK_FILE = re.compile(r'^\s*File "([^"]+)", line \d+')
DEPRECATED_IMPORT = re.compile(r"Importing '[^']+' from '([\w.]+)' is deprecated|The `([\w.]+)` (?:Python )?module is deprecated")
SWITCH_OFF_NOTE = "Deprecation warnings can be disabled by setting"
# Where our Python lives (what could import a deprecated ansible-core module).
PYTHON_TREES = ("plugins", "roles", "extensions", "tests/harness", "tests/unit", "playbooks", "benchmarks")
OUR_COLLECTION = "/ansible_collections/gpufleet/nvidia/"


def messages(text: str) -> list[tuple[str, str, list[str]]]:
    """(kind, first line, continuation lines) for each warning in `text`."""
    found: list[tuple[str, str, list[str]]] = []
    current: tuple[str, str, list[str]] | None = None
    for raw in text.splitlines():
        line = ANSI.sub("", raw).rstrip()
        start = MESSAGE_START.fullmatch(line)
        if start:
            current = (start.group(1), start.group(2), [])
            found.append(current)
        elif current is not None and MESSAGE_END.match(line):
            current = None
        elif current is not None:
            current[2].append(line)
    return found


def is_ours(path: str, root: Path) -> bool:
    if OUR_COLLECTION in path:
        return True
    try:
        Path(path).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    # The checkout's venvs and build trees hold dependencies, not our files.
    relative = Path(path).resolve().relative_to(root.resolve()).parts
    return not relative or relative[0] not in (".venv", ".venv-oldest", "build")


def ansible_core_file(path: str) -> bool:
    return bool(re.search(r"/ansible/(?!.*ansible_collections/)", path)) or path.startswith("<frozen")


def importers(module: str, root: Path) -> list[str]:
    """Our Python files that import `module` (or a name from it)."""
    pattern = re.compile(r"^\s*(from\s+{0}\s+import\b|import\s+{0}\b)".format(re.escape(module)), re.MULTILINE)
    found = []
    for tree in PYTHON_TREES:
        for path in sorted((root / tree).rglob("*")):
            if path.is_file() and (path.suffix == ".py" or "files" in path.parts):
                try:
                    text = path.read_text(errors="replace")
                except OSError:
                    continue
                if pattern.search(text):
                    found.append(str(path.relative_to(root)))
    return found


def judge_deprecation(first: str, rest: list[str], root: Path) -> tuple[bool, str]:
    """(is ours, why) for one deprecation warning."""
    for line in rest:
        origin = ORIGIN.fullmatch(line)
        if origin:
            path = origin.group(1)
            return is_ours(path, root), "origin {0}".format(path)
    frames = [m.group(1) for m in map(TRACEBACK_FILE.match, rest) if m]
    callers = [path for path in frames if not ansible_core_file(path)]
    if callers:
        return is_ours(callers[-1], root), "raised from {0}".format(callers[-1])
    imported = DEPRECATED_IMPORT.search(first)
    if imported:
        module = imported.group(1) or imported.group(2)
        ours = importers(module, root)
        if ours:
            return True, "{0} is imported by {1}".format(module, ", ".join(ours))
        return False, "{0} is imported by no file of ours: a dependency's".format(module)
    return True, "no origin: cannot be shown to be a dependency's"


def judge(text: str, root: Path) -> tuple[list[str], list[str]]:
    """(failures, tolerated) as printable lines."""
    failures, tolerated = [], []
    found = messages(text)
    switch_off_notes = 0
    for kind, first, rest in found:
        if kind == "WARNING":
            if first.startswith(SWITCH_OFF_NOTE):
                switch_off_notes += 1
            else:
                failures.append("[WARNING]: " + first)
            continue
        ours, why = judge_deprecation(first, rest, root)
        (failures if ours else tolerated).append("[DEPRECATION WARNING]: {0} ({1})".format(first, why))
    if switch_off_notes and not any(message[0] == "DEPRECATION WARNING" for message in found):
        failures.append("[WARNING]: {0} (with no deprecation warning)".format(SWITCH_OFF_NOTE))
    return failures, tolerated


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: warning-gate.py LOG ROOT", file=sys.stderr)
        return 2
    failures, tolerated = judge(Path(argv[1]).read_text(errors="replace"), Path(argv[2]))
    for line in tolerated:
        print("tolerated, a dependency's: " + line)
    for line in failures:
        print("ours: " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
