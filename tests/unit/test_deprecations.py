# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Nothing of ours uses what ansible-core deprecates (it would warn on every run).

Two kinds that ansible-core 2.20 and 2.21 report:

- facts read as top-level variables (`ansible_os_family`): 2.20 deprecated
  INJECT_FACTS_AS_VARS' default; read `ansible_facts['os_family']`. Every
  `ansible_<name>` in our playbooks, roles, Molecule files and templates must
  be a variable that is not a fact: a special or connection variable.
- deprecated imports (`ansible.module_utils._text`, ...): a fixed list with
  the replacement, and every `ansible.*` name our Python imports, imported
  here under the running ansible-core with its deprecation reporting
  recorded (so a deprecation a new ansible-core adds shows up on the main
  venv's lane before a release notes it).
"""

from __future__ import annotations

import ast
import importlib
import re
import typing as t
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Where our YAML and Jinja live (the example inventories too: group_vars may template facts).
TEMPLATED = ("roles", "playbooks", "extensions/molecule", "inventory/examples", ".config", "tests/harness")
TEMPLATED_SUFFIXES = (".yml", ".yaml", ".j2")
# ansible_* names that are not facts: special variables (the "Special
# Variables" page of the Ansible docs), connection variables (ansible-core's
# MAGIC_VARIABLE_MAPPING, added below), keys of results and paths.
NOT_FACTS = {
    "ansible_check_mode",
    "ansible_collection_name",
    "ansible_config_file",
    "ansible_dependent_role_names",
    "ansible_diff_mode",
    "ansible_facts",
    "ansible_failed_result",
    "ansible_failed_task",
    "ansible_forks",
    "ansible_index_var",
    "ansible_inventory_sources",
    "ansible_limit",
    "ansible_loop",
    "ansible_loop_var",
    "ansible_managed",
    "ansible_parent_role_names",
    "ansible_parent_role_paths",
    "ansible_play_batch",
    "ansible_play_hosts",
    "ansible_play_hosts_all",
    "ansible_play_name",
    "ansible_play_role_names",
    "ansible_playbook_python",
    "ansible_python_interpreter",
    "ansible_role_name",
    "ansible_role_names",
    "ansible_run_tags",
    "ansible_search_path",
    "ansible_skip_tags",
    "ansible_verbosity",
    "ansible_version",
    # Result keys and path segments, not variables.
    "ansible_stats",
    "ansible_collections",
    # Connection variables the test ground's podman connection reads.
    "ansible_podman_host",
    "ansible_podman_extra_args",
    "ansible_podman_executable",
}
ANSIBLE_NAME = re.compile(r"\bansible_[a-z0-9_]+")

# Modules ansible-core deprecates as a whole, with what to use instead.
DEPRECATED_MODULES = {
    "ansible.module_utils._text": "ansible.module_utils.common.text.converters",
    "ansible.module_utils.common._collections_compat": "collections.abc",
    "ansible.module_utils.six": "the Python 3 standard library",
    "ansible.module_utils.pycompat24": "the Python 3 standard library",
    "ansible.compat.importlib_resources": "importlib.resources",
    "ansible.plugins.cache.base": "ansible.plugins.cache",
    "ansible.parsing.ajson": "ansible.module_utils.common.json",
}
PYTHON_TREES = ("plugins", "extensions", "tests/unit", "tests/harness", "benchmarks")


def not_facts() -> set[str]:
    from ansible import constants

    names = set(NOT_FACTS)
    for aliases in constants.MAGIC_VARIABLE_MAPPING.values():
        names.update(aliases)
    return names


def templated_files() -> list[Path]:
    found = []
    for tree in TEMPLATED:
        for path in sorted((ROOT / tree).rglob("*")):
            if path.suffix in TEMPLATED_SUFFIXES and path.is_file() and "output" not in path.relative_to(ROOT).parts:
                found.append(path)
    return found


def top_level_fact_uses(text: str, allowed: set[str]) -> list[str]:
    """The ansible_* names in `text` that are not known special variables: injected facts."""
    return sorted({name for name in ANSIBLE_NAME.findall(text) if name not in allowed and not name.startswith(("ansible_become", "ansible_ssh_"))})


def test_no_top_level_fact_variables():
    allowed = not_facts()
    wrong = []
    for path in templated_files():
        for name in top_level_fact_uses(path.read_text(errors="replace"), allowed):
            wrong.append("{0}: {1} -> ansible_facts['{2}']".format(path.relative_to(ROOT), name, name[len("ansible_") :]))
    assert not wrong, "top-level fact variables (deprecated since ansible-core 2.20):\n" + "\n".join(wrong)


def test_the_fact_check_finds_a_fact():
    """Not vacuous: an injected fact is found, a special variable and ansible_facts are not."""
    text = "when: ansible_os_family == 'Debian' and ansible_check_mode and ansible_facts['distribution'] and ansible_host"
    assert top_level_fact_uses(text, not_facts()) == ["ansible_os_family"]
    assert templated_files(), "no YAML found under {0}".format(TEMPLATED)


def python_files() -> list[Path]:
    found = []
    for tree in PYTHON_TREES:
        found.extend(p for p in sorted((ROOT / tree).rglob("*.py")) if "output" not in p.relative_to(ROOT).parts)
    return found


def ansible_imports(source: str) -> list[tuple[str, str | None]]:
    """(module, name) for every import of ansible-core; name is None for `import module`."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (node.module == "ansible" or node.module.startswith("ansible.")):
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names if alias.name.startswith("ansible."))
    return found


def all_imports() -> dict[tuple[str, str | None], list[str]]:
    where: dict[tuple[str, str | None], list[str]] = {}
    for path in python_files():
        for item in ansible_imports(path.read_text()):
            where.setdefault(item, []).append(str(path.relative_to(ROOT)))
    return where


def deprecated_module(module: str, name: str | None) -> str | None:
    for deprecated in (module, "{0}.{1}".format(module, name) if name else module):
        if deprecated in DEPRECATED_MODULES:
            return deprecated
    return None


def test_no_deprecated_module_imports():
    wrong = []
    for (module, name), paths in sorted(all_imports().items(), key=str):
        deprecated = deprecated_module(module, name)
        if deprecated:
            wrong.append("{0} ({1}): use {2}".format(deprecated, ", ".join(paths), DEPRECATED_MODULES[deprecated]))
    assert not wrong, "deprecated ansible-core modules imported:\n" + "\n".join(wrong)


def test_the_import_check_reads_imports():
    source = "from ansible.module_utils._text import to_text\nimport ansible.module_utils.six\nfrom ansible.module_utils import _text\n"
    found = ansible_imports(source)
    assert [deprecated_module(*item) for item in found] == ["ansible.module_utils._text", "ansible.module_utils.six", "ansible.module_utils._text"]
    assert ("ansible.module_utils.basic", "AnsibleModule") in all_imports()


@pytest.fixture
def deprecations(monkeypatch) -> list[str]:
    """What ansible-core reports as deprecated while the test runs, on either path it reports by."""
    from ansible.module_utils.common import warnings
    from ansible.utils.display import Display

    seen: list[str] = []

    def record(*args: t.Any, **kwargs: t.Any) -> None:
        seen.append(str(kwargs.get("msg", args[1] if len(args) > 1 else args)))

    monkeypatch.setattr(Display, "deprecated", record)
    monkeypatch.setattr(warnings, "deprecate", lambda *args, **kwargs: seen.append(str(kwargs.get("msg", args))))
    return seen


def test_our_ansible_imports_are_not_deprecated_by_the_running_ansible_core(deprecations: list[str]):
    wrong = []
    for (module, name), paths in sorted(all_imports().items(), key=str):
        if module.startswith("ansible_collections"):
            continue
        before = len(deprecations)
        imported = importlib.import_module(module)
        if name is not None and name != "*":
            try:
                getattr(imported, name)
            except AttributeError:
                importlib.import_module("{0}.{1}".format(module, name))
        if len(deprecations) > before:
            wrong.append("{0}{1} ({2}): {3}".format(module, "." + name if name else "", ", ".join(paths), deprecations[before:]))
    assert not wrong, "imports the running ansible-core reports as deprecated:\n" + "\n".join(wrong)


def test_the_recording_sees_a_deprecated_import(deprecations: list[str]):
    """Not vacuous: ansible-core 2.20+ reports `to_text` from ansible.module_utils._text, and the fixture records it."""
    from ansible.release import __version__

    module = importlib.import_module("ansible.module_utils._text")
    module.to_text  # noqa: B018 (the attribute access is what warns)
    if tuple(int(n) for n in __version__.split(".")[:2]) >= (2, 20):
        assert any("ansible.module_utils._text" in message for message in deprecations), deprecations
