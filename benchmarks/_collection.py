# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Makes the checkout importable as ansible_collections.gpufleet.nvidia for the Python benchmarks.

Imported first by each of them (the script's own directory is on sys.path):
build/collections/ansible_collections/gpufleet/nvidia is linked to the
checkout when missing, as `make collection` links it.
"""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))
sys.path.insert(0, os.path.dirname(os.path.dirname(ROOT)))  # when the checkout is already the collection path

_LINK = os.path.join(ROOT, "build", "collections", "ansible_collections", "gpufleet", "nvidia")
if not os.path.exists(_LINK):
    os.makedirs(os.path.dirname(_LINK), exist_ok=True)
    os.symlink(ROOT, _LINK)
