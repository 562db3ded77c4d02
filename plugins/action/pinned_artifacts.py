# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpufleet.nvidia.pinned_artifacts: plan (per host) and resolve (once per
play) the pinned artifacts a run installs. Runs on the controller only: the
plan needs the inventory and the layer roles' data, and resolving once for all
hosts is what keeps a fleet of hundreds of nodes at one request per source."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleActionFail
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._artifacts import ArtifactResolver, plan_host, role_data

# The toolkit and crictl roles' settings that say what is fetched and from where.
SETTINGS = {
    "container_toolkit": ("container_toolkit_version", "container_toolkit_package_set",
                          "container_toolkit_operator_extensions", "container_toolkit_repo_manage",
                          "container_toolkit_apt_repo_url"),
    "crictl": ("crictl_version", "crictl_kubernetes_version", "crictl_download_url", "crictl_checksum_source",
               "crictl_checksums"),
}
BOOLEANS = ("container_toolkit_operator_extensions", "container_toolkit_repo_manage")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("layers", "mig_config", "plans"))
    _supports_check_mode = True

    def effective(self, task_vars: dict[str, t.Any]) -> dict[str, t.Any]:
        """Each setting as the layer's role will see it: the host's value, else the role's default."""
        values: dict[str, t.Any] = {}
        for role, names in SETTINGS.items():
            defaults = role_data(role, "defaults")
            for name in names:
                if name in task_vars:
                    values[name] = self._templar.template(task_vars[name])
                elif name in defaults:
                    values[name] = self._templar.template(defaults[name])
        for name in BOOLEANS:
            if name in values:
                values[name] = boolean(values[name], strict=False)
        return values

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        result["changed"] = False
        if "plans" in args:
            plans = args["plans"]
            if not isinstance(plans, dict):
                raise AnsibleActionFail("pinned_artifacts: plans must be a mapping of host to the plan its "
                                        "pinned_artifacts call returned")
            resolver = ArtifactResolver()
            result["hosts"] = resolver.resolve({str(h): (p or {}).get("plan", p) for h, p in plans.items()})
            result["fetched"] = sorted(resolver.answers)
            return result
        layers = args.get("layers")
        if not isinstance(layers, dict):
            raise AnsibleActionFail("pinned_artifacts: layers must be the gpufleet.nvidia.declared_layers lookup's "
                                    "answer")
        facts = task_vars.get("ansible_facts") or {}
        result["plan"] = plan_host(self.effective(task_vars), layers, facts, args.get("mig_config") or None)
        return result
