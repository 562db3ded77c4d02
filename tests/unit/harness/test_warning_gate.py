"""tests/harness/warning-gate.py, the demo's last step, on what ansible-playbook really prints.

A throwaway checkout (a play and a filter of "ours") and a throwaway
dependency collection (a module and a filter importing the deprecated
ansible.module_utils._text) are run by the venv's ansible-playbook; the
gate must fail the run for our deprecations and tolerate, naming them, the
dependency's. ansible-core 2.20 is the first to report these deprecations.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
OLD_IMPORT_MODULE = """from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils._text import to_text


def main():
    AnsibleModule(argument_spec={}).exit_json(changed=False, text=to_text("a"))


main()
"""
OLD_IMPORT_FILTER = """from ansible.module_utils._text import to_native


class FilterModule:
    def filters(self):
        return {"native": to_native}
"""


@pytest.fixture(name="gate")
def fixture_gate(harness_script):
    return harness_script("warning-gate.py")


def ansible_core_minor() -> tuple[int, int]:
    from ansible.release import __version__

    return tuple(int(n) for n in __version__.split(".")[:2])


def collection(base: Path, namespace: str, name: str, files: dict[str, str]) -> None:
    root = base / "ansible_collections" / namespace / name
    for relative, text in {"galaxy.yml": "namespace: {0}\nname: {1}\nversion: 1.0.0\n".format(namespace, name), **files}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


def play(root: Path, collections: Path, book: str) -> str:
    (root / "site.yml").write_text(book)
    (root / "ansible.cfg").write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_CONFIG=str(root / "ansible.cfg"))
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable, "site.yml"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    return done.stdout


@pytest.fixture(name="ground")
def fixture_ground(tmp_path):
    if ansible_core_minor() < (2, 20):
        pytest.skip("ansible-core 2.20 is the first to report these deprecations")
    root, deps = tmp_path / "checkout", tmp_path / "deps"
    root.mkdir()
    collection(deps, "dep", "old", {"plugins/modules/old_import.py": OLD_IMPORT_MODULE, "plugins/filter/old.py": OLD_IMPORT_FILTER})
    return root, deps


def test_a_dependencys_deprecated_imports_are_tolerated_and_named(gate, ground):
    root, deps = ground
    tasks = "    - dep.old.old_import:\n    - ansible.builtin.debug:\n        msg: \"{{ 'a' | dep.old.native }}\"\n"
    output = play(root, deps, "- hosts: localhost\n  gather_facts: false\n  tasks:\n" + tasks)
    assert "[DEPRECATION WARNING]: Importing 'to_text' from 'ansible.module_utils._text'" in output
    failures, tolerated = gate.judge(output, root)
    assert failures == []
    assert len(tolerated) == 2 and all("ansible.module_utils._text is imported by no file of ours" in line for line in tolerated), tolerated


def test_our_injected_fact_fails_with_its_origin(gate, ground):
    root, deps = ground
    output = play(
        root,
        deps,
        '- hosts: localhost\n  gather_facts: true\n  gather_subset: [min]\n  tasks:\n    - ansible.builtin.debug:\n        msg: "{{ ansible_os_family }}"\n',
    )
    failures, tolerated = gate.judge(output, root)
    assert tolerated == []
    assert len(failures) == 1 and "INJECT_FACTS_AS_VARS" in failures[0] and "origin {0}".format(root / "site.yml") in failures[0], failures


def test_our_deprecated_import_fails_naming_the_importer(gate, ground):
    root, deps = ground
    (root / "plugins" / "filter").mkdir(parents=True)
    (root / "plugins" / "filter" / "old.py").write_text(OLD_IMPORT_FILTER)
    collection(deps, "ours", "nvidia", {"plugins/filter/old.py": OLD_IMPORT_FILTER})
    output = play(
        root, deps, "- hosts: localhost\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: \"{{ 'a' | ours.nvidia.native }}\"\n"
    )
    failures = gate.judge(output, root)[0]
    assert len(failures) == 1 and "is imported by plugins/filter/old.py" in failures[0], failures


def test_any_other_warning_fails(gate, tmp_path):
    log = "TASK [x] ***\n[WARNING]: Collection gpufleet.nvidia does not support Ansible version 2.99.0\nok: [n]\n"
    assert gate.judge(log, tmp_path) == (["[WARNING]: Collection gpufleet.nvidia does not support Ansible version 2.99.0"], [])
    # The note that comes with deprecations is not a warning of its own, but alone it is one.
    assert gate.judge("[WARNING]: Deprecation warnings can be disabled by setting `deprecation_warnings=False` in ansible.cfg.\n", tmp_path)[0]
