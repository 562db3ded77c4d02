# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_config_labels: check a mig-parted v1 config on the controller and list its labels."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.config import MigConfigError, parse_config
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def mig_config_labels(config: object) -> list[str]:
    """The config's labels, sorted; AnsibleFilterError naming the field when it is invalid."""
    try:
        return sorted(parse_config(config))
    except MigConfigError as exc:
        raise AnsibleFilterError("mig_config_labels: invalid MIG config: {0}".format(exc)) from None


class FilterModule(FilterTable):
    """Filters over mig-parted configs."""

    FILTERS = (mig_config_labels,)
