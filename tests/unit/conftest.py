"""Make the checkout importable as ansible_collections.gpufleet.nvidia.

ansible-test needs the collection under an ansible_collections/<ns>/<name>
tree; plain pytest does not, so a symlink under build/ is enough here.
"""

from __future__ import annotations

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_MARKER = os.path.join("ansible_collections", "gpufleet", "nvidia")

if _MARKER not in _ROOT:
    _TREE = os.path.join(_ROOT, "build", "collections")
    _LINK = os.path.join(_TREE, _MARKER)
    if not os.path.islink(_LINK):
        os.makedirs(os.path.dirname(_LINK), exist_ok=True)
        try:
            os.symlink(_ROOT, _LINK)
        except FileExistsError:  # the other unit-test lane made it first
            pass
    if _TREE not in sys.path:
        sys.path.insert(0, _TREE)
