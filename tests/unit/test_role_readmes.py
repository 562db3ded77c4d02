"""A role README's variable table is the one generated from its argument spec.

Roles opt in by putting the markers below in their README.md; the table
between them must equal what `table()` renders from meta/argument_specs.yml.
Regenerate with: python tests/unit/test_role_readmes.py roles/<role>
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
BEGIN = "<!-- BEGIN argument_specs table (generated: python tests/unit/test_role_readmes.py roles/ROLE) -->"
END = "<!-- END argument_specs table -->"


def _cell(value: object) -> str:
    """Table-safe text, Ansible doc markup (C(x), O(x), V(x), M(x)...) as code."""
    text = re.sub(r"\b(?:C|O|V|M|P|RV|I)\(([^()]*)\)", r"`\1`", str(value))
    return text.replace("|", "\\|").replace("\n", " ")


def _default(option: dict) -> str:
    value = option.get("default")
    if value is None:
        return ""
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    text = text[:-4] if text.endswith("\n...") else text.replace("\n...", "")
    return "`{0}`".format(_cell(text))


def table(role: Path) -> str:
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]
    lines = ["| Variable | Type | Default | Description |", "|---|---|---|---|"]
    for name, option in spec.get("options", {}).items():
        kind = option["type"] + ("[{0}]".format(option["elements"]) if option.get("elements") else "")
        if option.get("choices"):
            kind += " (" + ", ".join(str(c) for c in option["choices"]) + ")"
        description = option["description"]
        description = " ".join(description) if isinstance(description, list) else description
        lines.append("| `{0}` | {1} | {2} | {3} |".format(name, _cell(kind), _default(option), _cell(description)))
    return "\n".join(lines)


def section(readme: str) -> str | None:
    if BEGIN not in readme:
        return None
    return readme.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def opted_in() -> list[Path]:
    return [role for role in sorted(ROLES.iterdir())
            if (role / "README.md").is_file() and BEGIN in (role / "README.md").read_text()] if ROLES.is_dir() else []


@pytest.mark.parametrize("role", opted_in(), ids=lambda p: p.name)
def test_readme_table_is_generated_from_the_argument_spec(role: Path):
    assert section((role / "README.md").read_text()) == table(role), (
        "regenerate: python tests/unit/test_role_readmes.py roles/{0}".format(role.name))


def write(role: Path) -> None:
    readme = (role / "README.md").read_text()
    head, rest = readme.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    (role / "README.md").write_text(head + BEGIN + "\n" + table(role) + "\n" + END + tail)


if __name__ == "__main__":
    for path in sys.argv[1:]:
        write(Path(path))
