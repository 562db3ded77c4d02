# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_summary: turn nvml_info's facts into lines a person reads in one glance."""

from __future__ import annotations

from collections import Counter

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils._filters import FilterTable


def _mig_state(mig: dict) -> str:
    if not mig or not mig.get("capable"):
        return "MIG n/a"
    if mig.get("pending_change"):
        now = "on" if mig.get("enabled") else "off"
        then = "on" if mig.get("pending_enabled") else "off"
        return f"MIG {now} -> {then} (reset/reboot pending)"
    if not mig.get("enabled"):
        return "MIG off"
    counts = Counter(gi.get("profile_name") or f"profile {gi.get('profile_id')}" for gi in mig.get("gpu_instances") or [])
    if not counts:
        return "MIG on, no instances"
    layout = ", ".join(f"{count} x {name}" for name, count in sorted(counts.items()))
    return f"MIG on: {layout}"


def _gpu_line(gpu: dict) -> str:
    memory_gib = (gpu.get("memory_total_mib") or 0) / 1024
    arch = gpu.get("architecture") or "unknown"
    capability = gpu.get("compute_capability") or "?"
    return f"GPU {gpu.get('index')}: {gpu.get('name')}, {memory_gib:.0f} GiB, {arch} (sm {capability}), {_mig_state(gpu.get('mig') or {})}"


def gpu_summary(nvml: dict) -> list[str]:
    """One header line for the node, then one line per GPU."""
    if not isinstance(nvml, dict) or "status" not in nvml:
        raise AnsibleFilterError("gpu_summary: expected the `nvml` result of gpufleet.nvidia.nvml_info")
    if not nvml.get("driver_loaded") or nvml.get("status") != "ok":
        return [f"no usable NVIDIA driver ({nvml.get('status')}): {nvml.get('reason')}"]
    gpus = nvml.get("gpus") or []
    header = f"driver {nvml.get('driver_version')}, CUDA {nvml.get('cuda_driver_version')}, {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    return [header] + [_gpu_line(gpu) for gpu in gpus]


class FilterModule(FilterTable):
    """Filters over nvml_info facts."""

    FILTERS = (gpu_summary,)
