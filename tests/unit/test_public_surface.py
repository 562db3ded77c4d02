"""The collection's public surface is what it says it is.

- Every module_utils and plugin_utils package and module is private: its name
  starts with `_` and it carries the PRIVATE header, as community.docker marks
  its own (other collections must not import them; they change without notice).
- meta/runtime.yml's `internal` action group lists exactly the modules whose
  documentation extends gpufleet.nvidia.attributes.internal (the note that says
  they are the roles' plumbing, not an interface). A module added to one and not
  the other fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PRIVATE_TREES = (ROOT / "plugins" / "module_utils", ROOT / "plugins" / "plugin_utils")
PRIVATE_HEADER = "# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may"


def private_files() -> list[Path]:
    return sorted(path for tree in PRIVATE_TREES for path in tree.rglob("*.py"))


@pytest.mark.parametrize("tree", PRIVATE_TREES, ids=lambda p: p.name)
def test_every_top_level_name_is_private(tree: Path) -> None:
    public = sorted(p.name for p in tree.iterdir() if p.name != "__pycache__" and not p.name.startswith("_"))
    assert not public, f"{tree.relative_to(ROOT)}: {public} must start with '_' (private to the collection)"


@pytest.mark.parametrize("path", private_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_private_file_says_so(path: Path) -> None:
    head = path.read_text(encoding="utf-8").splitlines()[:8]
    assert PRIVATE_HEADER in head, f"{path.relative_to(ROOT)}: add the PRIVATE header after the SPDX line"


def module_fragments(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(node.value.value).get("extends_documentation_fragment") or []
    raise AssertionError(f"{path}: no DOCUMENTATION")


def test_the_internal_group_is_the_modules_documented_as_internal() -> None:
    runtime = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())
    grouped = set(runtime["action_groups"]["internal"])
    documented = {path.stem for path in (ROOT / "plugins" / "modules").glob("*.py") if "gpufleet.nvidia.attributes.internal" in module_fragments(path)}
    assert documented, "no module extends gpufleet.nvidia.attributes.internal"
    assert grouped == documented, (
        f"only in meta/runtime.yml's internal group: {sorted(grouped - documented)}; only documented as internal: {sorted(documented - grouped)}"
    )
