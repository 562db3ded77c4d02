# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Kubernetes: which cri-tools (crictl) minors work with which Kubernetes
minors."""

from __future__ import annotations

_CRI_TOOLS = "kubernetes-sigs/cri-tools@ba03eabc:README.md"

# cri-tools' compatibility matrix: a Kubernetes minor in [first, last] works
# with any cri-tools minor in the same group ("last": None = open-ended);
# Kubernetes minors older than every group need their own cri-tools minor.
# Within a group the README still recommends the same minor ("new features
# added to the CRI may not be fully supported if they diverge"): a warning.
CRICTL_GROUPS = (
    {"first": "1.27", "last": None, "source": _CRI_TOOLS, "checked": "2026-11-25"},
    {"first": "1.16", "last": "1.26", "source": _CRI_TOOLS, "checked": "2026-11-25"},
)
