# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The base of the collection's filter plugins' FilterModule classes, and the wrapper of a plan filter."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

Plan = t.TypeVar("Plan")


class FilterTable:
    """A FilterModule whose filters are the functions in FILTERS, each under its own name (the name its
    documentation file beside the plugin carries), so that no name is written twice."""

    FILTERS: tuple[t.Callable[..., t.Any], ...] = ()

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {function.__name__: function for function in self.FILTERS}


def plan_of_mapping(filter_name: str, plan: t.Callable[[Mapping[str, t.Any]], Plan], request: object, not_a_mapping: str) -> Plan:
    """`plan(request)` for the filter `filter_name`, whose plan function raises ValueError for bad input.

    A request that is not a mapping fails with `not_a_mapping` ({0}: the name of the request's type), and a
    ValueError with its own text, each as AnsibleFilterError after the filter's name, so that the playbook sees
    which filter refused its input and why, without a traceback."""
    if not isinstance(request, Mapping):
        raise AnsibleFilterError("{0}: {1}".format(filter_name, not_a_mapping.format(type(request).__name__)))
    try:
        return plan(request)
    except ValueError as exc:
        raise AnsibleFilterError("{0}: {1}".format(filter_name, exc)) from None
