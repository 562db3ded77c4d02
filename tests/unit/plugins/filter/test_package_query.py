# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""package_query, package_versions: the roles' reading of the one package query format."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.package_query import (
    FilterModule,
    package_query,
    package_versions,
)


def test_both_managers() -> None:
    assert package_query("a:amd64\t1.0-1\thi \n", "dpkg") == [{"name": "a", "version": "1.0-1", "selection": "hold", "status": "installed", "error": None}]
    assert package_query("b\t0:2.0-1.el9\n", "rpm") == [{"name": "b", "version": "2.0-1.el9", "selection": "install", "status": "installed", "error": None}]
    assert set(FilterModule().filters()) == {"package_query", "package_versions"}


def test_bad_input_is_named() -> None:
    with pytest.raises(AnsibleFilterError, match="package_query: manager must be one of dpkg, rpm, not 'apt'"):
        package_query("", "apt")
    with pytest.raises(AnsibleFilterError, match="package_query: expects the query's stdout"):
        package_query(["a"], "dpkg")
    with pytest.raises(AnsibleFilterError, match="package_versions: expects package_query's rows"):
        package_versions({"a": "1"})


def test_package_facts_shape_last_row_wins() -> None:
    rows = package_query("a\t1\tii \nb\t2\tii \na\t3\tii \n", "dpkg")
    assert package_versions(rows) == {"a": [{"version": "3"}], "b": [{"version": "2"}]}
    assert package_versions([]) == {}
