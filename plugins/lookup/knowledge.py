# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: knowledge
short_description: A table of the collection's knowledge base
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Returns a table of the knowledge base under C(plugins/module_utils/_knowledge/), the one place where the
    collection keeps the facts it decides from (package names, query formats, versions), each row with its source
    and the date it was checked.
  - Roles read the tables through this lookup rather than keeping a copy in their C(vars/).
  - A table is named C(<module>.<TABLE>), for example C(packages.TOOLKIT_PACKAGE_SETS) for
    C(TOOLKIT_PACKAGE_SETS) in C(_knowledge/packages.py). Tables are upper-case module attributes; tuples are
    returned as lists.
  - An unknown module or table fails with the term and the names that exist.
options:
  _terms:
    description: Tables to return, as C(<module>.<TABLE>).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: The packages of the full toolkit set, in install order
  ansible.builtin.debug:
    msg: >-
      {{ lookup('gpufleet.nvidia.knowledge', 'packages.TOOLKIT_PACKAGE_SETS')
         | selectattr('sets', 'contains', 'full') | map(attribute='package') | list }}

- name: The dpkg-query format the collection reads packages with
  ansible.builtin.command:
    argv: [dpkg-query, -W, -f, "{{ lookup('gpufleet.nvidia.knowledge', 'packages.DPKG_QUERY_FORMAT').value }}"]
  changed_when: false
  check_mode: false
"""

RETURN = r"""
_value:
  description:
    - One table per term. A table of rows is a list of mappings, each with C(source) and C(checked); a one-off
      constant is a mapping with C(value), C(source) and C(checked).
  type: list
  elements: raw
"""

import importlib
import pkgutil
import re
import typing as t

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _knowledge

_PACKAGE = _knowledge.__name__
_TABLE = re.compile(r"^[A-Z][A-Z0-9_]*$")


def modules() -> list[str]:
    """The knowledge base's modules."""
    return sorted(info.name for info in pkgutil.iter_modules(_knowledge.__path__) if not info.name.startswith("_"))


def tables(module: t.Any) -> list[str]:
    """A module's tables: its upper-case attributes that hold data."""
    return sorted(name for name, value in vars(module).items() if _TABLE.fullmatch(name) and isinstance(value, (dict, list, tuple)))


def plain(value: t.Any) -> t.Any:
    """A copy in the types Ansible templates handle (lists, not tuples), so no caller changes the table."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def table(term: t.Any) -> t.Any:
    """The table a term names, or a lookup error naming the term and what exists."""
    text = str(term)
    module_name, _dot, name = text.partition(".")
    known = modules()
    if module_name not in known:
        raise AnsibleLookupError(
            "knowledge: '{0}' names no module of the knowledge base; use <module>.<TABLE> with a module of: {1}".format(text, ", ".join(known))
        )
    module = importlib.import_module("{0}.{1}".format(_PACKAGE, module_name))
    names = tables(module)
    if name not in names:
        raise AnsibleLookupError(
            "knowledge: '{0}' names no table of {1}; its tables: {2}".format(text, module_name, ", ".join("{0}.{1}".format(module_name, n) for n in names))
        )
    return plain(getattr(module, name))


class LookupModule(LookupBase):
    def run(self, terms: list[t.Any], variables: dict[str, t.Any] | None = None, **kwargs: t.Any) -> list[t.Any]:
        if not terms:
            raise AnsibleLookupError(
                "knowledge: name a table as <module>.<TABLE>, for example packages.TOOLKIT_PACKAGE_SETS (modules: {0})".format(", ".join(modules()))
            )
        return [table(term) for term in terms]
