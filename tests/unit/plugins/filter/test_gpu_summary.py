"""gpu_summary turns nvml_info facts into the lines make demo prints."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.gpu_summary import gpu_summary


def _gpu(index: int, **mig) -> dict:
    base_mig = {"capable": True, "enabled": False, "pending_enabled": False, "pending_change": False, "gpu_instances": []}
    base_mig.update(mig)
    return {"index": index, "name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 40960, "architecture": "ampere", "compute_capability": "8.0", "mig": base_mig}


def _nvml(*gpus: dict) -> dict:
    return {"status": "ok", "driver_loaded": True, "driver_version": "550.127.05", "cuda_driver_version": "12.4", "gpus": list(gpus)}


def test_header_and_one_line_per_gpu():
    lines = gpu_summary(_nvml(_gpu(0), _gpu(1)))
    assert lines[0] == "driver 550.127.05, CUDA 12.4, 2 GPUs"
    assert lines[1] == "GPU 0: NVIDIA A100-SXM4-40GB, 40 GiB, ampere (sm 8.0), MIG off"
    assert len(lines) == 3


def test_mig_layout_is_counted_by_profile():
    gis = [{"profile_name": "1g.5gb"}, {"profile_name": "3g.20gb"}, {"profile_name": "1g.5gb"}]
    line = gpu_summary(_nvml(_gpu(0, enabled=True, pending_enabled=True, gpu_instances=gis)))[1]
    assert line.endswith("MIG on: 2 x 1g.5gb, 1 x 3g.20gb")


def test_pending_mode_change_is_called_out():
    line = gpu_summary(_nvml(_gpu(3, enabled=False, pending_enabled=True, pending_change=True)))[1]
    assert line.endswith("MIG off -> on (reset/reboot pending)")


def test_non_mig_gpu():
    gpu = _gpu(0)
    gpu["mig"] = {"capable": False}
    assert gpu_summary(_nvml(gpu))[1].endswith("MIG n/a")


def test_no_driver_gives_the_reason():
    nvml = {"status": "driver_not_loaded", "driver_loaded": False, "reason": "the nvidia kernel module is not loaded", "gpus": []}
    assert gpu_summary(nvml) == ["no usable NVIDIA driver (driver_not_loaded): the nvidia kernel module is not loaded"]


def test_rejects_something_else():
    with pytest.raises(AnsibleFilterError, match="gpu_summary: expected"):
        gpu_summary({"gpus": []})
