# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Validators match whole: `re.match("^...$", value)` accepts "550.163.01\\n" (`$` matches before a final newline),
and a value that passed it reached a shell, a unit file and a path (issue 37). Every anchored pattern in the
collection's code and node commands is used with fullmatch."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A compiled pattern anchored at both ends, on one line, without MULTILINE (where `$` means a line's end).
COMPILED = re.compile(r"""^\s*(_?[A-Z][A-Z0-9_]*)\s*=\s*re\.compile\(r?(["'])\^.*?\$\2(\s*,\s*[^)]*)?\)""", re.MULTILINE)
INLINE = re.compile(r"""re\.match\(r?(["'])\^(?:(?!\1).)*\$\1""")


def sources() -> list[Path]:
    found = sorted((ROOT / "plugins").rglob("*.py"))
    for command in sorted((ROOT / "roles").glob("*/files/*")):
        if command.is_file() and command.read_bytes()[:40].startswith(b"#!") and b"python" in command.read_bytes()[:40]:
            found.append(command)
    return found


def test_anchored_patterns_are_used_with_fullmatch() -> None:
    offenders = []
    for path in sources():
        text = path.read_text(encoding="utf-8")
        names = [m.group(1) for m in COMPILED.finditer(text) if "MULTILINE" not in (m.group(3) or "") and "re.M" not in (m.group(3) or "")]
        for number, line in enumerate(text.splitlines(), 1):
            if INLINE.search(line) or any(re.search(r"\b{0}\.match\(".format(re.escape(name)), line) for name in names):
                offenders.append("{0}:{1}: {2}".format(path.relative_to(ROOT), number, line.strip()))
    assert not offenders, "use fullmatch (a trailing newline passes match with $):\n" + "\n".join(offenders)
