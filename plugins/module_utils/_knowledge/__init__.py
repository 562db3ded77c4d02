# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""gpufleet.nvidia's knowledge base: every fact the collection decides from,
one row per fact, each row with its source and the date it was checked.

The modules, filters and roles read these tables; no table is kept twice.
"""
