# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_runtime: the collection's node-side code, once per collection version, checked by sha256."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
import sys
import typing as t
from pathlib import Path

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.gpufleet.nvidia.plugins.action.node_runtime import (
    MANIFEST,
    PACKAGE,
    USERS,
    ActionModule,
    build_runtime,
    collection_version,
    known_state,
    plan,
    runtime_sources,
    state_after,
)
from ansible_collections.gpufleet.nvidia.plugins.modules.node_runtime import ARGUMENT_SPEC
from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play

ROOT = Path(__file__).resolve().parents[4]
COMMANDS = (
    ROOT / "roles" / "mig" / "files" / "gpufleet-mig",
    ROOT / "roles" / "verify" / "files" / "gpufleet-verify-boot",
    ROOT / "roles" / "node_labels" / "files" / "gpufleet-node-labels",
)


def test_the_action_takes_every_module_option_but_those_it_computes() -> None:
    assert ActionModule._VALID_ARGS == frozenset(ARGUMENT_SPEC) - {"name", "manifest", "users"}


def runtime_imports(command: Path) -> set[str]:
    """The runtime modules a boot command imports (from gpufleet_runtime[.x] import y; y a module where x is a package)."""
    found = set()
    for node in ast.walk(ast.parse(command.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == PACKAGE:
            if node.module == PACKAGE:
                found.update(alias.name for alias in node.names)
                continue
            module = node.module.split(".", 1)[1].replace(".", "/")
            if (ROOT / "plugins" / "module_utils" / module).is_dir():
                found.update("{0}/{1}".format(module, alias.name) for alias in node.names)
            else:
                found.add(module)
    return found


@pytest.mark.parametrize("command", COMMANDS, ids=lambda p: p.name)
def test_the_runtime_holds_what_each_boot_command_imports(command: Path) -> None:
    imported = runtime_imports(command)
    assert imported, command  # the commands import from the runtime, not a private copy
    files = build_runtime().files
    assert {m for m in imported if "{0}/{1}.py".format(PACKAGE, m) not in files} == set()
    assert command.read_text().count("@GPUFLEET_NODE_RUNTIME@") == 1  # the role writes the directory there


def test_every_package_of_the_runtime_carries_its_init() -> None:
    files = build_runtime().files
    packages = {path.rsplit("/", 1)[0] for path in files if "/" in path}
    assert {"{0}/_mig".format(PACKAGE), "{0}/_nvml".format(PACKAGE)} <= packages
    assert sorted(p for p in packages if p + "/__init__.py" not in files) == []


def test_the_runtime_is_the_import_closure_of_its_entry_modules(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "_a.py").write_text("from ._b import x\nfrom .pkg import leaf as _leaf\n")
    (tmp_path / "_b.py").write_text("import os\nx = 1\n")
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "leaf.py").write_text("from .. import _c\n")
    (tmp_path / "_c.py").write_text("")
    (tmp_path / "_unused.py").write_text("")
    assert sorted(runtime_sources(tmp_path, ("_a",))) == ["_a.py", "_b.py", "_c.py", "pkg/__init__.py", "pkg/leaf.py"]
    with pytest.raises(AnsibleActionFail, match="_nope not found"):
        runtime_sources(tmp_path, ("_nope",))


def test_the_manifest_lists_every_file_by_sha256_and_the_name_follows_the_content() -> None:
    built = build_runtime()
    manifest = json.loads(built.manifest)
    assert manifest["version"] == collection_version(ROOT) and manifest["collection"] == "gpufleet.nvidia"
    assert manifest["files"] == {rel: hashlib.sha256(c).hexdigest() for rel, c in built.files.items()}
    assert built.name == "{0}-{1}".format(manifest["version"], manifest["digest"][:12])
    assert build_runtime() == built  # the same content, the same name


def test_the_collection_version_comes_from_galaxy_yml_or_an_installed_manifest(tmp_path: Path) -> None:
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": "2.3.4"}}))
    assert collection_version(tmp_path) == "2.3.4"
    (tmp_path / "galaxy.yml").write_text("namespace: gpufleet\nname: nvidia\nversion: 2.3.5\n")
    assert collection_version(tmp_path) == "2.3.5"
    with pytest.raises(AnsibleActionFail, match="galaxy.yml or MANIFEST.json"):
        collection_version(tmp_path / "nowhere")


CURRENT, OLD, OLDER = "/r/1.0.0-aaaaaaaaaaaa", "/r/0.9.0-bbbbbbbbbbbb", "/r/0.8.0-cccccccccccc"
MIG, VERIFY = "/usr/local/sbin/gpufleet-mig", "/usr/local/sbin/gpufleet-verify-boot"


def found(differing: list[str], versions: dict[str, list[str]]) -> dict[str, t.Any]:
    return {"path": CURRENT, "differing": differing, "manifest_before": "", "versions": versions}


def test_plan_installs_only_what_differs_and_keeps_a_version_another_command_imports() -> None:
    # An upgrade, met by the mig role first: verify's command still imports the old version.
    decided = plan(found(["x.py", MANIFEST], {OLD: [MIG, VERIFY], OLDER: []}), MIG, "present")
    assert decided == {"install": True, "changed_files": ["x.py", MANIFEST], "remove": [OLDER], "released": []}
    # Then verify: mig's command names the current version now; the old one is verify's alone.
    decided = plan(found([], {CURRENT: [MIG], OLD: [VERIFY]}), VERIFY, "present")
    assert decided == {"install": False, "changed_files": [], "remove": [], "released": [OLD]}
    # The next run: nothing to do.
    assert plan(found([], {CURRENT: [MIG, VERIFY]}), MIG, "present") == {"install": False, "changed_files": [], "remove": [], "released": []}


def test_plan_with_state_absent_installs_nothing_and_releases_what_only_the_user_imports() -> None:
    decided = plan(found(["x.py"], {CURRENT: [VERIFY], OLD: []}), VERIFY, "absent")
    assert decided == {"install": False, "changed_files": [], "remove": [], "released": [OLD, CURRENT]}
    assert plan(found([], {CURRENT: [MIG, VERIFY]}), VERIFY, "absent")["released"] == []


# -- through ansible-playbook, on this machine as the node -------------------------------------------------------


def playbook(tmp_path: Path, tasks: str, check: bool = False) -> dict[str, t.Any]:
    book = tmp_path / "play.yml"
    book.write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        + tasks
        + """
    - ansible.builtin.copy:
        content: "{{ {'first': first | default(none), 'second': second | default(none)} | to_json }}"
        dest: %s
      check_mode: false
"""
        % (tmp_path / "out.json")
    )
    local_play(book, "--diff", *(["--check"] if check else []))
    return json.loads((tmp_path / "out.json").read_text())


def task(root: Path, user: Path, register: str, state: str = "present") -> str:
    return """
    - gpufleet.nvidia.node_runtime: {root: "%s", user: "%s", state: %s}
      register: %s
""" % (root, user, state, register)


def test_install_once_then_one_call_that_changes_nothing(tmp_path: Path) -> None:
    root, user = tmp_path / "lib", tmp_path / "sbin-command"
    built = build_runtime()
    predicted = playbook(tmp_path, task(root, user, "first"), check=True)["first"]
    assert predicted["changed"] and not root.exists()  # check mode predicts, writes nothing
    assert predicted["diff"][0]["after"] == built.manifest and predicted["diff"][0]["before"] == ""
    out = playbook(tmp_path, task(root, user, "first") + task(root, user, "second"))
    first, second = out["first"], out["second"]
    version_dir = root / built.name
    assert first["changed"] and first["path"] == str(version_dir)
    assert sorted(first["changed_files"]) == sorted(list(built.files) + [MANIFEST])
    assert {rel: (version_dir / rel).read_bytes() for rel in built.files} == built.files
    assert (version_dir / MANIFEST).read_text() == built.manifest
    assert {oct((version_dir / rel).stat().st_mode & 0o777) for rel in built.files} == {"0o644"}
    assert not second["changed"] and second["changed_files"] == [] and second["removed"] == []
    assert predicted["path"] == first["path"] == second["path"]


def test_a_changed_file_is_put_back_and_an_old_version_goes_when_nothing_imports_it(tmp_path: Path) -> None:
    root, user = tmp_path / "lib", tmp_path / "sbin-command"
    built = build_runtime()
    playbook(tmp_path, task(root, user, "first"))
    version_dir = root / built.name
    changed = "{0}/_nvml/session.py".format(PACKAGE)
    (version_dir / changed).write_text("# edited on the node\n")
    # Three old versions: one our user imports, one another command imports, one nobody imports;
    # and a directory that is not a runtime (an earlier release's private copy is the roles' to remove).
    old = {name: root / name for name in ("0.0.1-111111111111", "0.0.2-222222222222", "0.0.3-333333333333")}
    for path in old.values():
        path.mkdir()
        (path / MANIFEST).write_text(json.dumps({"collection": "gpufleet.nvidia", "files": {}}))
    (root / "gpufleet_mig").mkdir()
    user.write_text('RUNTIME = "{0}"\n'.format(old["0.0.1-111111111111"]))
    other = Path(USERS[1])
    assert not other.exists(), "this test needs {0} absent on the machine that runs it".format(other)
    out = playbook(tmp_path, task(root, user, "first") + task(root, user, "second"), check=False)
    first = out["first"]
    assert first["changed"] and first["changed_files"] == [changed]
    assert (version_dir / changed).read_bytes() == built.files[changed]
    assert first["released"] == [{"path": str(old["0.0.1-111111111111"]), "state": "absent"}]
    assert sorted(first["removed"]) == [str(old["0.0.2-222222222222"]), str(old["0.0.3-333333333333"])]
    assert sorted(p.name for p in root.iterdir()) == sorted([built.name, "0.0.1-111111111111", "gpufleet_mig"])
    assert {
        "before": {"path": str(old["0.0.2-222222222222"]), "state": "directory"},
        "after": {"path": str(old["0.0.2-222222222222"]), "state": "absent"},
    } in first["diff"]
    assert not out["second"]["changed"]


def test_state_absent_installs_nothing_and_releases_the_runtime_only_its_user_imports(tmp_path: Path) -> None:
    root, user = tmp_path / "lib", tmp_path / "sbin-command"
    built = build_runtime()
    playbook(tmp_path, task(root, user, "first"))
    user.write_text('RUNTIME = "{0}"\n'.format(root / built.name))
    out = playbook(tmp_path, task(root, user, "first", state="absent"))["first"]
    assert not out["changed"] and out["released"] == [{"path": str(root / built.name), "state": "absent"}]
    assert (root / built.name / MANIFEST).exists()  # the role removes it, with its command
    fresh = tmp_path / "fresh"
    assert not playbook(tmp_path, task(fresh, user, "first", state="absent"))["first"]["changed"]
    assert not fresh.exists()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda p: p.name)
def test_a_command_whose_runtime_is_gone_says_which_and_how_to_fix_it(command: Path, tmp_path: Path) -> None:
    installed = tmp_path / command.name
    gone = tmp_path / "lib" / "0.0.1-000000000000"
    installed.write_text(command.read_text().replace("@GPUFLEET_NODE_RUNTIME@", str(gone)))
    done = subprocess.run([sys.executable, str(installed), "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=60)
    assert done.returncode == 1
    assert "node runtime {0} is missing; run the gpufleet.nvidia.{1} role again".format(gone, command.parent.parent.name) in done.stdout


# -- the run's state: the node is asked once per run -----------------------------------------------------------


def test_a_later_role_of_the_run_plans_from_the_run_state_without_asking_the_node(tmp_path: Path) -> None:
    """mig, node_labels and verify each install a command: the node is asked by the first only."""
    root = tmp_path / "lib"
    mig, labels = USERS[0], USERS[2]
    built = build_runtime()
    out = playbook(tmp_path, task(root, Path(mig), "first") + task(root, Path(labels), "second"))
    first, second = out["first"], out["second"]
    assert first["asked_node"] and first["changed"] and not second["asked_node"] and not second["changed"]
    assert second["path"] == first["path"] == str(root / built.name) and second["released"] == []
    assert second["run_state"] == {"name": built.name, "root": str(root), "versions": {str(root / built.name): sorted([mig, labels])}}
    # Check mode asks the node every time: an earlier role's predicted install is not there.
    checked = playbook(tmp_path, task(root, Path(mig), "first") + task(root, Path(labels), "second"), check=True)
    assert checked["second"]["asked_node"] and "run_state" not in checked["second"]


def test_the_run_state_releases_what_a_probe_would() -> None:
    """An old version two commands imported: the first role's rewrite leaves it to the second, which releases it."""
    built = build_runtime()
    root, mig, verify = "/usr/local/lib/gpufleet", USERS[0], USERS[1]
    old, current = root + "/0.0.1-111111111111", root + "/" + built.name
    found = {"path": current, "differing": ["MANIFEST.json"], "manifest_before": "", "versions": {old: [mig, verify]}}
    decided = plan(found, mig, "present")
    assert decided["released"] == [] and decided["remove"] == []
    after = state_after(found, decided, built, root, mig, "present")
    assert after["versions"] == {old: [verify], current: [mig]}
    known = known_state(after, built, root, verify, "present")
    assert known is not None and plan(known, verify, "present")["released"] == [old]
    # A node where the current version is not in place, another root or runtime, or a command not of the
    # collection: the node is asked.
    assert known_state(state_after(found, decided, built, root, mig, "absent"), built, root, verify, "present") is None
    assert known_state(after, built, "/opt/gpufleet", verify, "present") is None
    assert known_state(dict(after, name="0.0.0-000000000000"), built, root, verify, "present") is None
    assert known_state(after, built, root, "/usr/local/sbin/someone-else", "present") is None
    assert known_state(None, built, root, verify, "present") is None
