#!/usr/bin/env python3
"""Render a role's variable table into its README from meta/argument_specs.yml.

    tests/harness/role-readme.py roles/mig            # rewrite the table in place
    tests/harness/role-readme.py --check roles/mig    # exit 1 if it is stale

The table goes between the lines `<!-- BEGIN argument_specs -->` and
`<!-- END argument_specs -->` of roles/<role>/README.md; a README without
them is left alone. tests/unit/test_role_readmes.py runs --check for every
role, so a README never disagrees with the spec (which itself mirrors
defaults/main.yml).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

BEGIN, END = "<!-- BEGIN argument_specs -->", "<!-- END argument_specs -->"


# Ansible doc markup -> Markdown: C(x), O(x), V(x), RV(x), M(x) become `x`.
MARKUP = re.compile(r"\b(?:C|O|V|RV|M)\(([^()]*(?:\([^()]*\)[^()]*)*)\)")


def cell(text: str) -> str:
    return MARKUP.sub(r"`\1`", " ".join(str(text).split())).replace("|", "\\|")


def default_text(option: dict) -> str:
    value = option.get("default")
    if value in ("", [], {}):
        return "`{0}`".format(json.dumps(value))
    if isinstance(value, (list, dict)):
        return "`{0}`".format(json.dumps(value, separators=(", ", ": ")))
    if isinstance(value, bool):
        return "`{0}`".format(str(value).lower())
    return "`{0}`".format(value)


def table(role: Path) -> str:
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    rows = ["| Variable | Type | Default | Description |", "|---|---|---|---|"]
    for name, option in spec.get("options", {}).items():
        kind = option["type"] + ("[{0}]".format(option["elements"]) if option.get("elements") else "")
        if option.get("choices"):
            kind += " (" + ", ".join(str(c) for c in option["choices"]) + ")"
        description = option["description"]
        text = " ".join(description) if isinstance(description, list) else description
        rows.append("| `{0}` | {1} | {2} | {3} |".format(name, cell(kind), cell(default_text(option)), cell(text)))
    return "\n".join(rows)


def render(readme: str, role: Path) -> str:
    head, _sep, rest = readme.partition(BEGIN + "\n")
    _old, _sep, tail = rest.partition(END)
    return head + BEGIN + "\n" + table(role) + "\n" + END + tail


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("roles", nargs="+", type=Path)
    args = parser.parse_args(argv)
    stale = []
    for role in args.roles:
        readme = role / "README.md"
        if not readme.exists() or BEGIN not in readme.read_text():
            continue
        text = readme.read_text()
        fresh = render(text, role)
        if fresh != text:
            stale.append(str(readme))
            if not args.check:
                readme.write_text(fresh)
    if args.check and stale:
        sys.stderr.write("stale variable table in {0}; run tests/harness/role-readme.py {1}\n".format(
            ", ".join(stale), " ".join(str(r) for r in args.roles)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
