# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The version matrix: which driver, CUDA, GPU, toolkit, engine and crictl
versions fit together. The facts are the knowledge base's (module_utils/_knowledge);
this package holds the comparison logic and the views of those tables.

- tables.py: the knowledge base in the rules' shapes (data access).
- versions.py, node.py, custom.py: versions, the node's view and findings, and
  user-declared rules.
- data.py, view.py: the tables with user rows and their lookups; the NodeView.
- rules_cuda.py, rules_driver.py, rules_stack.py, images.py: the rules, and the
  verdict on CUDA images.
- evaluate.py: Matrix, every rule over one node.
- judge.py: the version_matrix / preflight_gate options and what they do.
"""
