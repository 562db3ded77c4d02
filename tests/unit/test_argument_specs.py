"""Every role's meta/argument_specs.yml mirrors its defaults/main.yml exactly.

defaults/main.yml is a role's public API; the argument spec is what
ansible-doc and the role README show. They must never drift apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES = Path(__file__).resolve().parents[2] / "roles"
PYTHON_TYPES = {"str": str, "bool": bool, "int": int, "list": list, "dict": dict, "float": (float, int), "path": str, "raw": object}


def role_dirs() -> list[Path]:
    return sorted(p for p in ROLES.iterdir() if (p / "tasks").is_dir()) if ROLES.is_dir() else []


def is_template(value: object) -> bool:
    return isinstance(value, str) and value.startswith("{{") and value.endswith("}}")


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


@pytest.mark.parametrize("role", role_dirs(), ids=lambda p: p.name)
def test_argument_specs_mirror_defaults(role: Path) -> None:
    defaults = load(role / "defaults" / "main.yml")
    spec = load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]
    options = spec.get("options", {})
    assert spec.get("short_description"), f"{role.name}: argument spec needs a short_description"
    assert sorted(defaults) == sorted(options), f"{role.name}: defaults and argument_specs differ"
    for name, option in options.items():
        assert name.startswith(f"{role.name}_"), f"{role.name}: {name} lacks the role prefix"
        assert option.get("description"), f"{role.name}: {name} has no description"
        assert option.get("type"), f"{role.name}: {name} has no type"
        assert option.get("default") == defaults[name], f"{role.name}: {name} default differs from defaults/main.yml"
        if is_template(defaults[name]):
            # A default that follows a collection-wide switch (gpufleet_bake) or
            # another layer's variable; Ansible templates it in the role.
            continue
        if defaults[name] is not None and option["type"] in PYTHON_TYPES:
            assert isinstance(defaults[name], PYTHON_TYPES[option["type"]]), f"{role.name}: {name} is not a {option['type']}"
        if "choices" in option and defaults[name] is not None:
            # For a list, Ansible applies choices to each element.
            values = defaults[name] if option["type"] == "list" else [defaults[name]]
            assert all(v in option["choices"] for v in values), f"{role.name}: {name} default is not one of its choices"


def test_roles_are_found() -> None:
    """The parametrised test above must not silently test nothing once roles exist."""
    if ROLES.is_dir() and any(ROLES.iterdir()):
        assert role_dirs()
