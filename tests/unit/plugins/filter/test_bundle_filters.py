# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The bundle filters adapt plugin_utils/_bundle.py (tested there): each is registered
under its documented name, and a caller's mistake is an AnsibleFilterError naming the filter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter import bundle

FILTERS = Path(bundle.__file__).parent


def test_every_filter_is_registered_and_documented():
    names = bundle.FilterModule().filters()
    assert sorted(names) == sorted(p.stem for p in FILTERS.glob("bundle_*.yml"))


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: bundle.bundle_request_errors([]), "bundle_request_errors: expected a mapping"),
        (
            lambda: bundle.bundle_host_plan(
                {}, {"platform": {"distribution": "Debian", "version": "12", "release": "b", "architecture": "x86_64"}, "mirror_url": "http://m"}
            ),
            "bundle_host_plan: incomplete input (KeyError",
        ),
        (lambda: bundle.bundle_plan({"a": {}}, [], "/d"), "bundle_plan: incomplete input (KeyError: 'repos')"),
        (lambda: bundle.bundle_manifest({"signing_key": ""}), "bundle_manifest: incomplete input"),
    ],
)
def test_a_callers_mistake_names_the_filter(call, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        call()


def test_the_request_filter_answers_as_the_plan_does():
    assert bundle.bundle_request_errors({"group": "g", "hosts": ["a"], "bundle_dir": "/d", "signing_key": "A" * 40, "images": []}) == []
