# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Role tests use the plugin tests' simulated nodes."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.conftest import sim_library, sim_node  # noqa: F401 pylint: disable=unused-import
