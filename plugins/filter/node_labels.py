# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_labels_plan: GPU Feature Discovery's labels for a node and the NFD feature file that carries them."""

from __future__ import annotations

import typing as t
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _gfd_labels

# NFD's local source refuses larger files (MaxFeatureFileSize, source/local/local.go).
_MAX_FILE_BYTES = 65536


def node_labels_plan(request: object) -> dict[str, t.Any]:
    """The labels, the file's content and the fleet report's summary, or a clear error before the node is touched.

    `request`: nvml (nvml_info's result), settings (mig_strategy, time_slicing, mps, rename_by_default), reads
    (machine: /sys/class/dmi/id/product_name or None, pci_classes: {bus_id: the sysfs class text or None}),
    expiry_time ('' or RFC 3339), header (the file's comment, one or more lines) and optionally path (the file's
    path on the node, checked).
    """
    if not isinstance(request, Mapping):
        raise AnsibleFilterError("node_labels_plan: expects a mapping with nvml, settings and reads, got {0!r}".format(type(request).__name__))
    settings = request.get("settings") or {}
    path = request.get("path")
    if path is not None:
        directory, name = str(path).rsplit("/", 1) if "/" in str(path) else ("", str(path))
        if not directory.startswith("/"):
            raise AnsibleFilterError("node_labels_plan: node_labels_dir must be an absolute path, got {0!r}".format(directory))
        if not name or name.startswith(".") or name in ("..",):
            raise AnsibleFilterError(
                "node_labels_plan: node_labels_file {0!r} would never be read: NFD skips names that start with a dot; "
                "use a plain name such as gpufleet-gpu".format(name)
            )
    try:
        expiry = _gfd_labels.check_expiry(request.get("expiry_time"))
        labels = _gfd_labels.labels(request.get("nvml") or {}, settings, request.get("reads") or {})
    except ValueError as err:
        raise AnsibleFilterError("node_labels_plan: {0}".format(err)) from None
    content = _gfd_labels.feature_file(labels, expiry, str(request.get("header") or ""))
    size = len(content.encode("utf-8"))
    if size > _MAX_FILE_BYTES:
        raise AnsibleFilterError(
            "node_labels_plan: the feature file would be {0} bytes; NFD reads at most {1}: shorten node_labels_header".format(size, _MAX_FILE_BYTES)
        )
    return {"labels": labels, "content": content, "summary": _gfd_labels.summary(labels, settings.get("mig_strategy", "none"))}


class FilterModule:
    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {"node_labels_plan": node_labels_plan}
