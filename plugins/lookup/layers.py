# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: layers
short_description: What site.yml's layer registry says about the layers of a GPU node
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns one view of the collection's layer registry (C(plugins/plugin_utils/_layers.yml)), the one table of
    the layers C(playbooks/site.yml) runs, in order.
  - V(tags) gives the layers' tags (each layer's finer tags start with its tag and an underscore); V(prefixes) the
    prefixes of the variables that make up a host's declaration; V(watch_paths) every place the layers write,
    which the fast path reads whole; V(names) the layers that declare variables other layers read
    (P(gpufleet.nvidia.declared_layers#lookup)'s layers).
  - The fast path role reads it; a playbook that runs some layers can read the same order.
options:
  _terms:
    description: The views to return, each one of V(tags), V(prefixes), V(watch_paths), V(names).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The tags site.yml's layers run under
  ansible.builtin.debug:
    msg: "{{ lookup('gpufleet.nvidia.layers', 'tags') }}"
"""

RETURN = r"""
_value:
  description: One list per term.
  type: list
  elements: list
"""

import typing as t

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _layers

VIEWS: dict[str, t.Callable[[], list[str]]] = {
    "tags": _layers.tags,
    "prefixes": _layers.prefixes,
    "watch_paths": _layers.watch_paths,
    "names": lambda: list(_layers.LAYERS),
}


class LookupModule(LookupBase):
    def run(self, terms: list[t.Any], variables: dict[str, t.Any] | None = None, **kwargs: t.Any) -> list[t.Any]:
        unknown = [str(term) for term in terms if str(term) not in VIEWS]
        if unknown or not terms:
            raise AnsibleLookupError("layers: give one or more of {0} (got {1})".format(", ".join(VIEWS), ", ".join(unknown) or "none"))
        return [VIEWS[str(term)]() for term in terms]
