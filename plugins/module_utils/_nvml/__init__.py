# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""A thin ctypes binding of the NVML calls gpufleet.nvidia needs, and the readers over it.

Runs on the managed host with its own Python (3.8+, standard library only), so
no pynvml package has to be installed there; the imports inside the package are
relative, so it also runs as the node runtime's package. The library is found
as NVIDIA's tools find it: dlopen("libnvidia-ml.so.1"), unless a path is given.

- constants.py, structs.py, values.py: nvml.h's values, the ctypes structs and
  prototypes, and the plain values callers see instead of ctypes objects.
- library.py, session.py, mig_calls.py, health_calls.py: NvmlSession, one
  method per NVML call.
- health.py: read_health, one GPU's hardware health.
- facts.py: NvmlFactsCollector, everything nvml_info reports.
"""
