# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""The verify checks that judge a node the same way wherever they run, one module per layer.

Two callers: the verify role on the controller (plugin_utils/_verify.py, over
what the role read from the node) and gpufleet-verify-boot on the node at boot
(from the node runtime, over what it reads itself). Each function takes what
was observed and returns findings or a whole check, in the report's shape
(result.py); the words of a fix that differ between an Ansible run and a boot
come from remedies.py.
"""
