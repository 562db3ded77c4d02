# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_labels_plan: GPU Feature Discovery's labels for a node and the NFD feature file that carries them."""

from __future__ import annotations

import typing as t

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _gfd_labels
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import plan_of_mapping


def node_labels_plan(request: object) -> dict[str, t.Any]:
    """The labels, the file's content and the fleet report's summary, or a clear error before the node is touched.

    `request`: nvml (nvml_info's result), settings (mig_strategy, time_slicing, mps, rename_by_default), reads
    (machine: /sys/class/dmi/id/product_name or None, pci_classes: {bus_id: the sysfs class text or None}),
    expiry_time ('' or RFC 3339), header (the file's comment, one or more lines) and optionally path (the file's
    path on the node, checked). The plan is module_utils/_gfd_labels.plan, which the node's refresh command
    (gpufleet-node-labels) runs too.
    """
    return plan_of_mapping("node_labels_plan", _gfd_labels.plan, request, "expects a mapping with nvml, settings and reads, got {0!r}")


class FilterModule:
    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {"node_labels_plan": node_labels_plan}
