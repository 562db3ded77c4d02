# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd_unit_files: a role's own systemd units as gpufleet.nvidia.node_files entries, written in one call."""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable

# Where local administrators' and our own units go (systemd.unit(5)): above the packages' /usr/lib/systemd/system.
SYSTEMD_UNIT_DIR = "/etc/systemd/system"


def systemd_unit_files(units: object, texts: object, directory: str = SYSTEMD_UNIT_DIR, mode: str = "0644") -> list[dict[str, str]]:
    """One node_files entry per unit, in the order given: its path under `directory`, its text and mode.

    `texts` are the units' rendered templates, in the same order (as
    query('ansible.builtin.template', ...) returns them).
    """
    if not isinstance(units, Sequence) or isinstance(units, str) or not all(isinstance(unit, str) and unit and "/" not in unit for unit in units):
        raise AnsibleFilterError("systemd_unit_files: give a list of unit names (such as example.service), got {0!r}".format(units))
    if not isinstance(texts, Sequence) or isinstance(texts, str) or len(texts) != len(units):
        raise AnsibleFilterError(
            "systemd_unit_files: give one text per unit ({0} units: {1}), got {2}".format(
                len(units), ", ".join(units), repr(texts) if isinstance(texts, str) else type(texts).__name__
            )
        )
    if not posixpath.isabs(directory):
        raise AnsibleFilterError("systemd_unit_files: directory must be absolute, got {0!r}".format(directory))
    return [{"path": posixpath.join(directory, unit), "content": str(text), "mode": mode} for unit, text in zip(units, texts)]


class FilterModule(FilterTable):
    """Filters that turn a role's units into node_files entries."""

    FILTERS = (systemd_unit_files,)
