#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: node_runtime
short_description: Install the collection's node runtime once per collection version
version_added: 0.1.0
description:
  - The node runtime is the collection's own node-side Python that commands installed on the node import - the
    NVML binding, the MIG planner and applier, the health judgement, the GFD label plan (C(plugins/module_utils)) -
    in one versioned directory, C(<root>/<version>-<hash>/), with a C(MANIFEST.json) of each file's sha256. The boot
    commands C(gpufleet-mig), C(gpufleet-verify-boot) and C(gpufleet-node-labels) have that directory written into
    them when their role installs them, so they import the code of the collection version that installed them, and nothing is shipped twice.
  - The action plugin of the same name does the work on the controller. It computes the runtime (the files, their
    manifest and the hash) once per run, then asks the node with one small call whether that version is in place
    with the same sha256s. Only when it is missing or differs are the files sent (through M(gpufleet.nvidia.node_files)).
    A run where nothing changed costs one call with no library source in it.
  - Within a run, the node is asked once. The action plugin keeps the RV(run_state) it leaves as the run's (the host
    fact C(gpufleet_run_state), which names its run; see M(gpufleet.nvidia.run_state)), and the next role's call
    plans from it without asking the node, for the same runtime, O(root) and one of the collection's commands as
    O(user). Check mode asks the node every time.
  - Old versions are removed as soon as no command still imports them, never while one does - O(users) are read for
    the directory they name. A version only O(user) imports is returned in RV(released) for the role to remove in
    the same call that rewrites O(user) (or removes it, with O(state=absent)).
  - Check mode reports whether the runtime would be installed or an old version removed; the diff is the manifest
    before and after (which files change, by sha256) and the old versions removed.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.internal
options:
  user:
    description:
      - The command on the node that imports the runtime (the path written into it is RV(path)). Old versions that
        only this command imports are returned in RV(released).
    type: path
    required: true
  state:
    description:
      - V(present) installs the runtime when it is missing or differs.
      - V(absent) installs nothing; RV(released) then also lists the current version when only O(user) imports it,
        for a role that is taking O(user) away.
    type: str
    choices: [present, absent]
    default: present
  root:
    description: The directory that holds one subdirectory per installed version.
    type: path
    default: /usr/local/lib/gpufleet
  name:
    description: Set by the action plugin; do not give it. The versioned directory's name, C(<version>-<hash>).
    type: str
  manifest:
    description: Set by the action plugin; do not give it. The text of the runtime's C(MANIFEST.json).
    type: str
  users:
    description:
      - Set by the action plugin; do not give it. Every command that may import a runtime (the collection's boot
        commands and O(user)); a version is kept while one of them names it.
    type: list
    elements: path
notes:
  - A directory under O(root) counts as a runtime version only when it holds a C(MANIFEST.json) of this collection;
    nothing else under O(root) is touched.
requirements:
  - Python 3.8 or later on the target (standard library only).
seealso:
  - module: gpufleet.nvidia.node_files
"""

EXAMPLES = r"""
- name: Install the node runtime the boot command imports
  gpufleet.nvidia.node_runtime:
    user: /usr/local/sbin/gpufleet-mig
  register: runtime

- name: Install the command, naming the runtime's directory, and remove the versions only it imported
  gpufleet.nvidia.node_files:
    files: >-
      {{ [{'path': '/usr/local/sbin/gpufleet-mig', 'mode': '0755',
           'content': lookup('ansible.builtin.file', 'gpufleet-mig', rstrip=false)
                      | replace('@GPUFLEET_NODE_RUNTIME@', runtime.path)}] + runtime.released }}
"""

RETURN = r"""
path:
  description: The runtime's versioned directory on the node; put it on C(sys.path) to import RV(package).
  type: str
  returned: always
  sample: /usr/local/lib/gpufleet/0.1.0-3f2a9c0d1b7e
package:
  description: The package inside RV(path) that holds the collection's node-side modules.
  type: str
  returned: always
  sample: gpufleet_runtime
version:
  description: The collection version the runtime comes from.
  type: str
  returned: always
  sample: 0.1.0
digest:
  description: The sha256 of the runtime's file list and contents; its first 12 digits name RV(path).
  type: str
  returned: always
changed_files:
  description: The runtime's files that were (or in check mode would be) written, relative to RV(path).
  type: list
  elements: str
  returned: always
  sample: [MANIFEST.json, gpufleet_runtime/nvml/session.py]
removed:
  description: Old versions removed because no command imports them any more.
  type: list
  elements: str
  returned: always
released:
  description:
    - Old versions (with O(state=absent), also the current one) that only O(user) imports, as
      M(gpufleet.nvidia.node_files) entries with C(state=absent), to be removed together with O(user)'s new content.
  type: list
  elements: dict
  returned: always
  sample: [{path: /usr/local/lib/gpufleet/0.1.0-0123456789ab, state: absent}]
asked_node:
  description: Whether this call asked the node, or planned from the run's state, an earlier call's RV(run_state).
  type: bool
  returned: success
run_state:
  description:
    - The node's runtime versions and the commands that import each once the calling role has written O(user) (or
      removed it), kept as the run's state. Not in check mode.
  type: dict
  returned: success, not in check mode
  sample: {name: 0.1.0-0123456789ab, root: /usr/local/lib/gpufleet, versions: {/usr/local/lib/gpufleet/0.1.0-0123456789ab: [/usr/local/sbin/gpufleet-mig]}}
"""

import hashlib
import json
import os
import re
import typing as t

from ansible.module_utils.basic import AnsibleModule

MANIFEST = "MANIFEST.json"
COLLECTION = "gpufleet.nvidia"

ARGUMENT_SPEC: dict[str, t.Any] = {
    "user": {"type": "path", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "root": {"type": "path", "default": "/usr/local/lib/gpufleet"},
    "name": {"type": "str"},
    "manifest": {"type": "str"},
    "users": {"type": "list", "elements": "path"},
}


def sha256_of(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def differing_files(version_dir: str, manifest: dict[str, t.Any], manifest_text: str) -> list[str]:
    """The runtime's files that are missing or whose sha256 differs, the manifest last (it is written last)."""
    found = [rel for rel, digest in sorted(manifest["files"].items()) if sha256_of(os.path.join(version_dir, rel)) != digest]
    if read_text(os.path.join(version_dir, MANIFEST)) != manifest_text:
        found.append(MANIFEST)
    return found


def installed_versions(root: str) -> list[str]:
    """The directories under root that hold a manifest of this collection's runtime."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    versions = []
    for name in names:
        text = read_text(os.path.join(root, name, MANIFEST))
        try:
            if text is not None and json.loads(text).get("collection") == COLLECTION:
                versions.append(os.path.join(root, name))
        except (ValueError, AttributeError):
            continue  # not ours: a manifest of something else
    return versions


def importers(version_dir: str, users: t.Sequence[str]) -> list[str]:
    """The users whose text names version_dir (not as the prefix of a longer name)."""
    pattern = re.compile(re.escape(version_dir) + r"(?![\w.-])")
    return [user for user in users if pattern.search(read_text(user) or "")]


def probe(params: dict[str, t.Any]) -> dict[str, t.Any]:
    """Where the node stands: the current version's differing files, and who imports each other version."""
    manifest_text = params["manifest"]
    manifest = json.loads(manifest_text)
    current = os.path.join(params["root"], params["name"])
    before = read_text(os.path.join(current, MANIFEST))
    return {
        "path": current,
        "differing": differing_files(current, manifest, manifest_text),
        "manifest_before": before or "",
        "versions": {path: importers(path, params["users"] or []) for path in installed_versions(params["root"])},
    }


def main() -> None:
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_together=[("name", "manifest")], supports_check_mode=True)
    if not module.params["name"]:
        module.fail_json(
            msg="node_runtime runs through its action plugin, which sets name and manifest; call it as gpufleet.nvidia.node_runtime from a playbook"
        )
    try:
        json.loads(module.params["manifest"])["files"]  # pylint: disable=expression-not-assigned
    except (ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg="manifest: not a runtime manifest ({0})".format(exc))
    # Reads only: the action plugin decides and sends the files.
    module.exit_json(changed=False, **probe(module.params))


if __name__ == "__main__":
    main()
