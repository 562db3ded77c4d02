"""A role README's variable table lists exactly its argument_specs options, with their defaults."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
ROW = re.compile(r"^\| `(?P<name>[a-z0-9_]+)` \| `(?P<default>[^`]*)` \|")


def documented_roles() -> list[Path]:
    return sorted(p for p in ROLES.iterdir() if (p / "README.md").is_file()) if ROLES.is_dir() else []


def shown(default) -> str:
    """How a default is written in a README table: YAML's scalar form, strings quoted only when empty or numeric."""
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, str):
        return json.dumps(default) if default == "" or default.isdigit() else default
    return json.dumps(default)


@pytest.mark.parametrize("role", documented_roles(), ids=lambda p: p.name)
def test_readme_table_matches_argument_specs(role: Path) -> None:
    options = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    rows = {m["name"]: m["default"] for m in map(ROW.match, (role / "README.md").read_text().splitlines()) if m}
    assert sorted(rows) == sorted(options), "README variables differ from argument_specs"
    for name, option in options.items():
        assert rows[name] == shown(option["default"]), "{0}: README says {1}, spec says {2}".format(
            name, rows[name], shown(option["default"]))
