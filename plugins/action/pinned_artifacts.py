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

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 templates every string it is given

    def trust_as_template(value: str) -> str:  # type: ignore[misc]
        return value


from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._artifacts import DRIVER_OS_VARS, ArtifactResolver, plan_host, role_data, role_os_vars

# The driver, toolkit and crictl roles' settings that say what is fetched and from where.
SETTINGS = {
    "driver": (
        "driver_state",
        "driver_source",
        "driver_cuda_repo_url",
        "driver_cuda_repo_key_url",
        "driver_distribution_mirror_url",
        "driver_distribution_key_url",
        "driver_distribution_backports",
    ),
    "container_toolkit": (
        "container_toolkit_version",
        "container_toolkit_package_set",
        "container_toolkit_operator_extensions",
        "container_toolkit_repo_manage",
        "container_toolkit_apt_repo_url",
        "container_toolkit_gpg_key_url",
    ),
    "crictl": ("crictl_version", "crictl_kubernetes_version", "crictl_download_url", "crictl_allow_insecure_transport", "crictl_checksums"),
}
BOOLEANS = ("container_toolkit_operator_extensions", "container_toolkit_repo_manage", "driver_distribution_backports")


def trusted(value: t.Any) -> t.Any:
    """The role's own vars files, read as plain YAML: their templates are the role's, so they are templated
    as the role would (ansible-core 2.19 templates only strings marked as trusted)."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("applied", "layers", "mig_config", "plans"))
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

    def driver_os(self, task_vars: dict[str, t.Any], values: dict[str, t.Any], facts: dict[str, t.Any]) -> dict[str, t.Any] | None:
        """The driver role's OS data for this host (its own vars files, in its own order), templated with the
        host's facts and settings as the role would; None when the node's OS has none or it cannot be templated."""
        if not facts.get("os_family") or not facts.get("distribution"):
            return None
        data = role_os_vars("driver", facts)
        templar = self._templar.copy_with_new_env()
        templar.available_variables = dict(task_vars, **values)
        out: dict[str, t.Any] = {}
        try:
            for name in DRIVER_OS_VARS:
                if name in data:
                    out[name] = templar.template(trusted(data[name]))
        except AnsibleError:
            return None
        return out

    def run(self, tmp: t.Any = None, task_vars: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        result["changed"] = False
        if "plans" in args:
            plans = args["plans"]
            if not isinstance(plans, dict):
                raise AnsibleActionFail("pinned_artifacts: plans must be a mapping of host to the plan its pinned_artifacts call returned")
            resolver = ArtifactResolver()
            result["hosts"] = resolver.resolve({str(h): (p or {}).get("plan", p) for h, p in plans.items()})
            result["fetched"] = sorted(resolver.answers)
            return result
        layers = args.get("layers")
        if not isinstance(layers, dict):
            raise AnsibleActionFail("pinned_artifacts: layers must be the gpufleet.nvidia.declared_layers lookup's answer")
        applied = args.get("applied")
        if applied is not None:
            if not isinstance(applied, list):
                raise AnsibleActionFail("pinned_artifacts: applied must be a list of layer names (such as upgrade_layers), got {0!r}".format(applied))
            # A playbook that applies only some layers (upgrade.yml's upgrade_layers): the others fetch nothing.
            layers = {name: dict(layer or {}, managed=bool((layer or {}).get("managed")) and name in applied) for name, layer in layers.items()}
        facts = task_vars.get("ansible_facts") or {}
        values = self.effective(task_vars)
        driver_os = self.driver_os(task_vars, values, facts) if (layers.get("driver") or {}).get("managed") else None
        result["plan"] = plan_host(values, layers, facts, args.get("mig_config") or None, driver_os=driver_os)
        return result
