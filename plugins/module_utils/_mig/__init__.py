# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""MIG partitions: mig-parted v1 configs, GPU layouts, and the plan between them.

Standard library only (Python 3.8+); the imports inside the package are
relative, so the same files run as the node runtime's package on a node (the
gpufleet-mig and gpufleet-verify-boot commands have no Ansible). The steps,
each usable alone:

- config.py: parse_config checks a mig-parted ``version: v1`` config and
  rejects what mig-parted rejects, naming the field; select_label.
- profiles.py: GPU-instance profiles of known MIG-capable GPUs, used while MIG
  is still off.
- state.py / reader.py: what a GPU offers and has, read through NVML
  (NvmlReader) into GpuState values.
- placement.py / plan.py: plan_gpu turns a GPU's state and the config entry
  that selects it into the smallest change, or says why the layout cannot fit.
- apply.py: MigApplier carries a plan out keeping a journal; MigController
  plans and applies a whole node (the mig_config module).
- run.py / hooks.py: MigRun, one label carried out as the boot command runs it,
  with mig-parted's hooks.
- describe.py / export.py: what people read, and the node's layout as a
  mig-parted config.
"""
