#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The documentation of the run_state action plugin (plugins/action/run_state.py);
# it runs on the controller only, so there is no module code.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_state
short_description: Forget what this run holds of a node after a change that made it stale
version_added: 0.1.0
description:
  - The roles of one run share what an earlier role read of the node - the NVML read (M(gpufleet.nvidia.nvml_info)
    with O(gpufleet.nvidia.nvml_info#module:run_read=shared)) and the state of the node runtime
    (M(gpufleet.nvidia.node_runtime)) - so that the node is asked once. A role that changes what one of them
    describes (the driver's packages or services, a MIG layout) forgets it here, and the next role that needs it asks
    the node again.
  - The state is a host fact, C(gpufleet_run_state), that names the run it was read in; a fact another run left
    (in a fact cache) is never taken for this run's. Roles never read the fact by name; the plugins do.
  - Runs on the controller; the node is not contacted.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.internal
attributes:
  check_mode:
    support: full
    details:
      - Forgetting changes nothing on the node; it is done in check mode too, since a predicted change makes the
        read stale all the same.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - It always returns C(changed=false).
options:
  forget:
    description: What this run no longer holds of the node.
    type: list
    elements: str
    choices: [nvml, runtime]
    required: true
"""

EXAMPLES = r"""
- name: Forget the run's NVML read once the MIG layout changed
  gpufleet.nvidia.run_state:
    forget: [nvml]
  when: mig_result is changed
"""

RETURN = r"""
forgotten:
  description: What was forgotten.
  type: list
  elements: str
  returned: always
  sample: [nvml]
"""
