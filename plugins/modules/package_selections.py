#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: package_selections
short_description: Hold or release a list of Debian packages in one call
version_added: 0.1.0
description:
  - Sets dpkg's selection (V(hold) or V(install)) of every package in O(name) that does not have it yet, with one
    C(dpkg --set-selections), where M(ansible.builtin.dpkg_selections) takes one round trip to the node per
    package. A driver is a dozen packages or more, held and released together.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.internal
options:
  name:
    description:
      - The packages, each installed or otherwise known to dpkg (dpkg keeps no selection for a package it has never
        seen). An empty list does nothing.
    type: list
    elements: str
    required: true
  selection:
    description: V(hold) keeps apt from upgrading or removing them; V(install) releases the hold.
    type: str
    choices: [hold, install]
    required: true
  lock_timeout:
    description:
      - Seconds to wait while another package manager holds one of dpkg's locks (a run killed in the middle of an
        install leaves its dpkg running; unattended-upgrades), asking again each second; then the task fails naming
        the holder.
    type: int
    default: 120
notes:
  - A package dpkg does not know fails the task before any selection is set, so a list is set whole or not at all.
requirements:
  - Python 3.8 or later on the target; C(dpkg) and C(dpkg-query).
"""

EXAMPLES = r"""
- name: Hold the driver's packages at the installed version
  gpufleet.nvidia.package_selections:
    name: [nvidia-driver, nvidia-kernel-dkms, libcuda1]
    selection: hold

- name: Release them for an upgrade
  gpufleet.nvidia.package_selections:
    name: [nvidia-driver, nvidia-kernel-dkms, libcuda1]
    selection: install
"""

RETURN = r"""
changed_packages:
  description: The packages whose selection was (or in check mode would be) set, in the order given.
  type: list
  elements: str
  returned: always
  sample: [nvidia-driver, libcuda1]
"""

import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._dpkg_selections import set_selections


class PackageSelections:
    """dpkg's selections of the named packages, read in one query and set in one call."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.names: list[str] = list(dict.fromkeys(module.params["name"]))
        self.selection: str = module.params["selection"]
        for index, name in enumerate(self.names):
            if not name or any(char.isspace() for char in name):
                module.fail_json(msg="name[{0}]: '{1}' is not a package name".format(index, name))

    def _run(self, argv: list[str]) -> tuple[int, str, str]:
        return self.module.run_command(argv, environ_update={"LC_ALL": "C"})

    def current(self) -> dict[str, str]:
        """Each known package's selection (install, hold, deinstall, purge)."""
        query = self.module.get_bin_path("dpkg-query", required=True)
        # Exit code 1 only says that some names matched nothing; those are missing from the output.
        rc, out, err = self._run([query, "-W", "-f", "${Package}\\t${db:Status-Want}\\n", "--"] + self.names)
        if rc not in (0, 1):
            self.module.fail_json(msg="dpkg-query failed: {0}".format(err.strip()), rc=rc, stderr=err)
        selections: dict[str, str] = {}
        for line in out.splitlines():
            package, want = (line.split("\t", 1) + [""])[:2]
            if package in self.names and want:
                selections.setdefault(package, want)
        return selections

    def run(self) -> dict[str, t.Any]:
        if not self.names:
            return {"changed": False, "changed_packages": []}
        before = self.current()
        unknown = [name for name in self.names if name not in before]
        if unknown:
            self.module.fail_json(
                msg="name: dpkg does not know {0}; install {1} first or leave {1} out of the list".format(
                    ", ".join(unknown), "it" if len(unknown) == 1 else "them"
                ),
                changed_packages=[],
            )
        changing = [name for name in self.names if before[name] != self.selection]
        result: dict[str, t.Any] = {"changed": bool(changing), "changed_packages": changing}
        if changing and self.module._diff:
            result["diff"] = {
                "before_header": "dpkg selections",
                "after_header": "dpkg selections",
                "before": "".join("{0} {1}\n".format(name, before[name]) for name in changing),
                "after": "".join("{0} {1}\n".format(name, self.selection) for name in changing),
            }
        if changing and not self.module.check_mode:
            set_selections(self.module, changing, self.selection, self.current, self.module.params["lock_timeout"])
        return result


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "list", "elements": "str", "required": True},
            "selection": {"type": "str", "choices": ["hold", "install"], "required": True},
            "lock_timeout": {"type": "int", "default": 120},
        },
        supports_check_mode=True,
    )
    module.exit_json(**PackageSelections(module).run())


if __name__ == "__main__":
    main()
