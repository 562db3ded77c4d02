# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: declared_layers
short_description: What a host declares for each layer of a GPU node
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - For each layer (V(driver), V(container_toolkit), V(container_runtime), V(cdi), V(crictl), V(mig),
    V(device_plugin), V(dcgm)), returns the
    layer's agreed variables as the layer's role will see them - the host's value where the host defines one, else
    the default of the layer's role in this collection - and whether the layer is managed on the host.
  - A layer is managed when the host defines any of its variables, or when its role is part of this collection
    (C(playbooks/site.yml) runs it with its defaults). MIG is managed only when C(mig_label) is not empty and
    C(mig_owner) is not V(dra_driver). The device plugin and DCGM layers are managed only where the host turns them
    on (C(device_plugin_config), C(dcgm_enabled)), as their roles read them.
  - The preflight and verify roles use it to judge exactly what the other roles will apply, without depending on
    those roles at run time.
options:
  _terms:
    description: Layers to return; all when none is given.
    type: list
    elements: str
    required: false
"""

EXAMPLES = r"""
- name: What does this host declare?
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.nvidia.declared_layers') }}"

- name: Only the driver layer
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.nvidia.declared_layers', 'driver').driver.vars.driver_branch | default('not declared') }}"
"""

RETURN = r"""
_value:
  description: One mapping of layer name to its declaration.
  type: list
  elements: dict
  contains:
    managed:
      description: Whether the layer is managed on this host.
      type: bool
    reason:
      description: Why the layer is or is not managed.
      type: str
    role:
      description: Whether the layer's role is part of this collection.
      type: bool
    vars:
      description: The layer's agreed variables with their effective values (absent when neither the host nor the
        role defines one).
      type: dict
    unresolved:
      description:
        - Agreed variables whose role default could not be templated here (it depends on the role's own
          C(vars/), chosen per OS inside the role); they are left out of RV(_value[].vars).
      type: list
      elements: str
"""

import copy
import typing as t
from pathlib import Path

import yaml
from ansible.errors import AnsibleError, AnsibleLookupError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.lookup import LookupBase
from ansible.utils.display import Display

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._layers import LAYER_SWITCHES, LAYER_VARIABLES, LAYERS, YAML_LOADER

display = Display()

ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"


# Parsed with libyaml where PyYAML has it (YAML_LOADER): the lookup runs once
# per host and reads six roles' defaults, and the pure-Python parser took half
# its time. Each role's parsed defaults by file, with the file's modification time, so
# a process that runs the lookup for many hosts (ansible-playbook's own
# process where a task runs in it, a test) parses each file once; an edited
# file (a new mtime) is read again. A worker forked for one host's task starts
# from what the controller's process holds, which is nothing unless it ran the
# lookup itself.
_DEFAULTS: dict[Path, tuple[int, dict[str, t.Any]]] = {}


def role_defaults(layer: str, roles_dir: Path = ROLES_DIR) -> dict[str, t.Any] | None:
    """The layer role's defaults, or None when the role is not in the collection. The caller gets its own copy."""
    path = roles_dir / layer / "defaults" / "main.yml"
    if not path.is_file():
        return None
    mtime = path.stat().st_mtime_ns
    cached = _DEFAULTS.get(path)
    if cached is None or cached[0] != mtime:
        with path.open(encoding="utf-8") as handle:
            cached = (mtime, yaml.load(handle, Loader=YAML_LOADER) or {})
        _DEFAULTS[path] = cached
    # A deep copy (the caller templates and keeps values of it); cheaper than YAML parsing by far.
    return copy.deepcopy(cached[1])


def declare(layer: str, host: dict[str, t.Any], defaults: dict[str, t.Any] | None, unresolved: t.Sequence[str] = ()) -> dict[str, t.Any]:
    """The declaration of one layer from the host's (templated) values and the role's defaults."""
    names = LAYER_VARIABLES[layer]
    values = {name: host[name] for name in names if name in host}
    for name in names:
        if name not in values and defaults is not None and name in defaults:
            values[name] = defaults[name]
    declared_by_host = sorted(name for name in names if name in host)
    if layer == "mig":
        managed = bool(values.get("mig_label"))
        reason = "mig_label is {0}".format("'{0}'".format(values["mig_label"]) if managed else "empty")
        if values.get("mig_owner") == "dra_driver":
            # NVIDIA's DRA driver creates and destroys MIG devices (DynamicMIG): nothing of ours to apply or assert.
            managed, reason = False, "mig_owner is dra_driver: NVIDIA's DRA driver owns MIG"
    elif layer in LAYER_SWITCHES:
        switch = LAYER_SWITCHES[layer]
        # As the role's `when: not <switch> | bool` reads it.
        managed = boolean(values.get(switch), strict=False)
        reason = "{0} is {1}".format(switch, "on" if managed else "off")
    elif declared_by_host:
        managed, reason = True, "declared by host variables ({0})".format(", ".join(declared_by_host))
    elif defaults is not None:
        managed, reason = True, "the gpufleet.nvidia.{0} role's defaults (site.yml applies them)".format(layer)
    else:
        managed, reason = False, "no {0}_* variables, no {0} role in this collection".format(layer)
    return {"managed": managed, "reason": reason, "role": defaults is not None, "vars": values, "unresolved": sorted(unresolved)}


class LookupModule(LookupBase):
    def run(self, terms: list[t.Any], variables: dict[str, t.Any] | None = None, **kwargs: t.Any) -> list[t.Any]:
        layers = [str(term) for term in terms] or list(LAYERS)
        unknown = [layer for layer in layers if layer not in LAYER_VARIABLES]
        if unknown:
            raise AnsibleLookupError("declared_layers: unknown layer(s) {0} (known: {1})".format(", ".join(unknown), ", ".join(LAYERS)))
        variables = variables or {}
        result = {}
        for layer in layers:
            defaults = role_defaults(layer)
            names = LAYER_VARIABLES[layer]
            host = {name: variables[name] for name in names if name in variables}
            # Template both with the host's variables over the role's defaults,
            # as Ansible would inside the layer's role.
            context = dict(defaults or {})
            context.update(variables)
            templar = self._templar.copy_with_new_env()
            templar.available_variables = context
            host = {name: templar.template(value) for name, value in host.items()}
            unresolved = []
            if defaults is not None:
                resolved = {}
                for name, value in defaults.items():
                    if name not in names or name in host:
                        continue
                    try:
                        resolved[name] = templar.template(value)
                    except AnsibleError:
                        # e.g. "{{ __driver_branch_default }}" from the role's
                        # own vars/, picked per OS inside the role.
                        unresolved.append(name)
                defaults = resolved
            result[layer] = declare(layer, host, defaults, unresolved)
        return [result]
