# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """What every gpufleet.nvidia module's documentation shares: its author and its `attributes`.

    Every module extends the base fragment (the author and the attributes' descriptions), then
    exactly one of the support sections, so that the author and the support levels are stated in
    one place and cannot drift between modules of the same kind:

      extends_documentation_fragment:
        - gpufleet.nvidia.attributes
        - gpufleet.nvidia.attributes.info_module     # or .mutating

    Modules that belong to the `nvml` action group also add
    `gpufleet.nvidia.attributes.action_group_nvml`; the roles' plumbing modules (the `internal`
    action group of meta/runtime.yml) add `gpufleet.nvidia.attributes.internal`.
    """

    # The author, the same for every module, and the attributes' descriptions; the support levels come from the
    # sections below.
    DOCUMENTATION = r"""
author:
  - gpufleet maintainers (@gpufleet)
options: {}
attributes:
  check_mode:
    description: Can run in check mode and return a changed status prediction without modifying the target.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when in diff mode.
  idempotent:
    description:
      - When run twice in a row with the same arguments, the second run reports no change and changes nothing.
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
"""

    # Read-only modules (*_info): nothing to predict, nothing to diff.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This module only reads state, so it runs unchanged in check mode.
  diff_mode:
    support: none
    details:
      - This module only reads state; there is nothing to diff.
  idempotent:
    support: full
    details:
      - This module only reads state; it always returns C(changed=false).
"""

    # Modules that change state and predict the change in check mode.
    MUTATING = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - In check mode the module computes the change it would make and reports it without applying it.
  diff_mode:
    support: full
  idempotent:
    support: full
"""

    ACTION_GROUP_NVML = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/gpufleet.nvidia.nvml) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - gpufleet.nvidia.nvml
"""

    # The roles' plumbing: one step of a role's own work (a file set, a read, an install at exact
    # versions). Listed in meta/runtime.yml's `internal` group, which tests/unit/test_public_surface.py
    # keeps equal to the modules that extend this section.
    INTERNAL = r"""
options: {}
notes:
  - Internal to gpufleet.nvidia. The collection's roles call this module for one step of their own work. It is
    not a stable interface; its options and results may change in any release. Call the roles instead.
attributes:
  action_group:
    description: Belongs to C(group/gpufleet.nvidia.internal), the list of the collection's internal modules.
    support: full
    membership:
      - gpufleet.nvidia.internal
"""
