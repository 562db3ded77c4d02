# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of gpufleet.nvidia.node_runtime: the collection's node-side
Python, installed on the node once per collection version.

The runtime is computed here once per run (files, manifest, hash); each host
then costs one small module call that compares the node's copy with the
manifest's sha256s. The files travel only when that version is missing or
differs, so a run where nothing changed carries no library source."""

from __future__ import annotations

import ast
import hashlib
import json
import posixpath
import typing as t
from dataclasses import dataclass
from pathlib import Path

import yaml
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.modules.node_runtime import ARGUMENT_SPEC
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _run_state

COLLECTION_ROOT = Path(__file__).resolve().parents[2]
MODULE_UTILS = COLLECTION_ROOT / "plugins" / "module_utils"
# The package the commands import, inside the versioned directory.
PACKAGE = "gpufleet_runtime"
MANIFEST = "MANIFEST.json"
# What the boot commands import (gpufleet-mig: _mig/ and _nvml/; gpufleet-verify-boot:
# also _nvml/facts, _verify/, _kernel_log and _kube_node_health; gpufleet-node-labels: _nvml/facts, _gfd_labels,
# the node_labels filter's own plan, and _pci), by path under module_utils; the runtime is these,
# what they import in turn, and the __init__ of each package on the way.
ENTRY_MODULES = (
    "_mig/apply",
    "_mig/config",
    "_mig/describe",
    "_mig/export",
    "_mig/hooks",
    "_mig/run",
    "_mig/state",
    "_nvml/constants",
    "_nvml/facts",
    "_nvml/health",
    "_nvml/session",
    "_cdi_names",
    "_durable",
    "_kernel_log",
    "_kube_node_health",
    "_findings",
    "_gfd_labels",
    "_pci",
    "_verify/cdi",
    "_verify/driver",
    "_verify/health",
    "_verify/mig",
    "_verify/remedies",
    "_verify/result",
)
# The commands that import a runtime; a version stays while one of them names it.
# They are the collection's own (the mig, verify and node_labels roles' boot commands).
USERS = ("/usr/local/sbin/gpufleet-mig", "/usr/local/sbin/gpufleet-verify-boot", "/usr/local/sbin/gpufleet-node-labels")
PACKAGE_INIT = (
    b"# gpufleet.nvidia's node runtime: the collection's module_utils that commands on the node import.\n"
    b"# Installed by gpufleet.nvidia.node_runtime, once per collection version; managed by Ansible.\n"
)

# Where the module looks by default (its option root), from the module's own argument spec.
DEFAULT_ROOT = ARGUMENT_SPEC["root"]["default"]

_cache: dict[Path, "Runtime"] = {}


@dataclass(frozen=True)
class Runtime:
    version: str
    digest: str
    files: dict[str, bytes]  # path inside the versioned directory -> content
    manifest: str

    @property
    def name(self) -> str:
        """The versioned directory: a new collection version, or changed code under the same version, is a new one."""
        return "{0}-{1}".format(self.version, self.digest[:12])


def collection_version(root: Path) -> str:
    """galaxy.yml in a checkout; MANIFEST.json in an installed collection (ansible-galaxy drops galaxy.yml)."""
    galaxy = root / "galaxy.yml"
    if galaxy.is_file():
        version = (yaml.safe_load(galaxy.read_text(encoding="utf-8")) or {}).get("version")
    else:
        try:
            version = json.loads((root / "MANIFEST.json").read_text(encoding="utf-8"))["collection_info"]["version"]
        except (OSError, ValueError, KeyError) as exc:
            raise AnsibleActionFail(
                "node_runtime: cannot read the collection version from {0}/galaxy.yml or MANIFEST.json ({1}); reinstall the collection".format(root, exc)
            ) from exc
    if not version:
        raise AnsibleActionFail("node_runtime: {0} has no version; set one".format(galaxy))
    return str(version)


def _imported(source: str, package: list[str]) -> list[str]:
    """The module_utils modules a module of `package` imports relatively (from .x import, from . import x,
    from ..x import), as paths without .py; a name imported from a package may be one of its modules."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        target = package[: len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        if node.module:
            found.append("/".join(target))
        found.extend("/".join(target + [alias.name]) for alias in node.names)
    return found


def runtime_sources(module_utils: Path, entries: t.Sequence[str] = ENTRY_MODULES) -> dict[str, bytes]:
    """The entry modules and everything they import relatively, with their packages' __init__, by path under
    module_utils. Names imported from a module (not modules themselves) match no file and are passed over."""
    files: dict[str, bytes] = {}
    todo = list(entries)
    while todo:
        module = todo.pop()
        parts = module.split("/")
        for rel, package in ((module + ".py", parts[:-1]), (module + "/__init__.py", parts)):
            if rel in files or not (module_utils / rel).is_file():
                continue
            files[rel] = (module_utils / rel).read_bytes()
            todo.extend(_imported(files[rel].decode("utf-8"), package))
            # Importing a module of a package runs the package's __init__ first.
            todo.extend("/".join(package[:i]) for i in range(1, len(package) + 1))
    missing = [m for m in entries if m + ".py" not in files and m + "/__init__.py" not in files]
    if missing:
        raise AnsibleActionFail("node_runtime: {0} not found under {1}".format(", ".join(missing), module_utils))
    return files


def build_runtime(root: Path = COLLECTION_ROOT) -> Runtime:
    sources = runtime_sources(root / "plugins" / "module_utils")
    files = {posixpath.join(PACKAGE, "__init__.py"): PACKAGE_INIT}
    files.update((posixpath.join(PACKAGE, rel), content) for rel, content in sources.items())
    sums = {rel: hashlib.sha256(content).hexdigest() for rel, content in sorted(files.items())}
    digest = hashlib.sha256(json.dumps(sums, sort_keys=True).encode()).hexdigest()
    version = collection_version(root)
    manifest = json.dumps({"collection": "gpufleet.nvidia", "version": version, "digest": digest, "files": sums}, indent=2, sort_keys=True) + "\n"
    return Runtime(version=version, digest=digest, files=files, manifest=manifest)


def runtime(root: Path = COLLECTION_ROOT) -> Runtime:
    """Once per run (per controller process): every host of every play gets the same one."""
    if root not in _cache:
        _cache[root] = build_runtime(root)
    return _cache[root]


def plan(found: dict[str, t.Any], user: str, state: str) -> dict[str, t.Any]:
    """What to do from the node's answer: write the current version or not, remove which old ones now, and which
    ones the user's role removes with its own files (only it imports them)."""
    current = found["path"]
    install = state == "present" and bool(found["differing"])
    remove, released = [], []
    for path, users in sorted(found["versions"].items()):
        if path == current and state == "present":
            continue
        if not users and state == "present":
            remove.append(path)
        elif set(users) <= {user}:
            released.append(path)
    return {"install": install, "changed_files": found["differing"] if install else [], "remove": remove, "released": released}


def known_state(run_state: t.Any, built: Runtime, root: str, user: str, state: str) -> dict[str, t.Any] | None:
    """The node's answer as an earlier call of this run left it (see state_after), where it still holds: the same
    runtime and root, a user the answer covered, and, to install nothing, the current version in place."""
    if not isinstance(run_state, dict) or run_state.get("name") != built.name or run_state.get("root") != root or user not in USERS:
        return None
    current = posixpath.join(root, built.name)
    versions = run_state.get("versions")
    if not isinstance(versions, dict) or (state == "present" and current not in versions):
        return None
    return {"path": current, "differing": [], "manifest_before": built.manifest, "versions": versions}


def state_after(found: dict[str, t.Any], decided: dict[str, t.Any], built: Runtime, root: str, user: str, state: str) -> dict[str, t.Any]:
    """The node once the calling role has written (or removed) user as node_runtime tells it to: the versions left and
    who imports each. The removed and released versions are gone, user imports the current version (state present)
    or none (absent)."""
    gone = set(decided["remove"]) | set(decided["released"])
    versions = {path: sorted(set(users) - {user}) for path, users in found["versions"].items() if path not in gone}
    if state == "present":
        versions[found["path"]] = sorted(set(versions.get(found["path"], [])) | {user})
    return {"name": built.name, "root": root, "versions": versions}


def install_entries(built: Runtime, version_dir: str, changed: t.Collection[str], remove: t.Sequence[str]) -> list[dict[str, t.Any]]:
    """node_files entries: the directories (a parent before its children), the files that differ, the manifest
    last (a run cut short leaves it stale, and the next run finishes the job), then the old versions."""
    entries: list[dict[str, t.Any]] = []
    if changed:
        directories = {posixpath.dirname(version_dir), version_dir}
        directories.update(posixpath.dirname(posixpath.join(version_dir, rel)) for rel in built.files)
        entries += [{"path": d, "state": "directory", "mode": "0755"} for d in sorted(directories)]
        entries += [
            {"path": posixpath.join(version_dir, rel), "content": built.files[rel].decode("utf-8"), "mode": "0644"}
            for rel in sorted(built.files)
            if rel in changed
        ]
    if MANIFEST in changed:
        entries.append({"path": posixpath.join(version_dir, MANIFEST), "content": built.manifest, "mode": "0644"})
    entries += [{"path": path, "state": "absent"} for path in remove]
    return entries


def diff_of(found: dict[str, t.Any], built: Runtime, decided: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    diffs: list[dict[str, t.Any]] = []
    if decided["install"]:
        header = posixpath.join(found["path"], MANIFEST)
        diffs.append({"before_header": header, "after_header": header, "before": found["manifest_before"], "after": built.manifest})
    diffs += [{"before": {"path": path, "state": "directory"}, "after": {"path": path, "state": "absent"}} for path in decided["remove"]]
    return diffs


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("user", "state", "root"))

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        state = args.get("state", "present")
        if state not in ("present", "absent"):
            raise AnsibleActionFail("node_runtime: state must be present or absent, not {0!r}".format(state))
        if not args.get("user"):
            raise AnsibleActionFail("node_runtime: user is required: the command on the node that imports the runtime")
        built = runtime()
        root = args.get("root") or DEFAULT_ROOT
        check_mode = self._play_context.check_mode
        # Check mode asks the node every time: an earlier role's predicted install is not on the node.
        found = None if check_mode else known_state(_run_state.held(task_vars, "runtime"), built, root, args["user"], state)
        result["asked_node"] = found is None
        if found is None:
            args.update(name=built.name, manifest=built.manifest, users=sorted(set(USERS) | {args["user"]}))
            found = self._execute_module(module_name="gpufleet.nvidia.node_runtime", module_args=args, task_vars=task_vars)
            if found.get("failed"):
                return found
        decided = plan(found, args["user"], state)
        result.update(
            changed=decided["install"] or bool(decided["remove"]),
            path=found["path"],
            package=PACKAGE,
            version=built.version,
            digest=built.digest,
            changed_files=decided["changed_files"],
            removed=decided["remove"],
            released=[{"path": p, "state": "absent"} for p in decided["released"]],
        )
        if self._play_context.diff and result["changed"]:
            result["diff"] = diff_of(found, built, decided)
        if result["changed"] and not check_mode:
            entries = install_entries(built, found["path"], decided["changed_files"], decided["remove"])
            written = self._execute_module(module_name="gpufleet.nvidia.node_files", module_args={"files": entries}, task_vars=task_vars)
            if written.get("failed"):
                result.update(failed=True, msg="node_runtime: installing {0} failed: {1}".format(found["path"], written.get("msg")))
                return result
        if not check_mode:
            # The run's state of the node's runtime (plugin_utils/_run_state), so that the next role of the run
            # that installs a command plans without asking the node again.
            result["run_state"] = state_after(found, decided, built, root, args["user"], state)
            result["ansible_facts"] = _run_state.facts_with(task_vars, runtime=result["run_state"])
        return result
