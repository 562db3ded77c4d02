# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The labels GPU Feature Discovery gives the simulated DGX A100 nodes, worked
out by hand from GFD's rules (NVIDIA/k8s-device-plugin@1b826acc internal/lm,
go-nvlib@3c161560 mig_profile.go) and the fixtures:

- tests/nvml-sim/nodes/dgx-a100-8x40gb.yml: driver 550.127.05, CUDA 12040,
  8 x NVIDIA A100-SXM4-40GB (memory_total_mib 40960, CC 8.0, MIG-capable, off).
- tests/nvml-sim/nodes/dgx-a100-mig-mixed.yml: MIG on GPUs 0-3 (3 empty),
  pending on 4 (still off), off on 5-7. MIG devices: GPU 0 3g.20gb, 2g.10gb,
  1g.5gb x2; GPU 1 1g.5gb x7; GPU 2 one 3g.20gb GI as 3 one-slice CIs.
- tests/nvml-sim/models/a100-sxm4-40gb.yml: per GI profile memory_mib, sm,
  ce/dec/enc/jpeg/ofa (nvmlDeviceGetAttributes of a MIG device: the GI's
  engines and memory, SMs = sm / GI slices * CI slices).

Shared by the unit test (tests/unit/plugins/filter/test_node_labels.py) and
the Molecule scenario node_labels, which compares nfd-worker's output with it.
"""

from __future__ import annotations

# gpu.machine: the test's /sys/class/dmi/id/product_name "NVIDIA DGX A100 920-23687-2530-000", sanitised.
MACHINE = "NVIDIA-DGX-A100-920-23687-2530-000"

# Whole GPUs, no sharing, MIG strategy none (no mig.strategy label then), every GPU of PCI class 0x030200.
WHOLE = {
    "nvidia.com/cuda.driver-version.full": "550.127.05",
    "nvidia.com/cuda.driver-version.major": "550",
    "nvidia.com/cuda.driver-version.minor": "127",
    "nvidia.com/cuda.driver-version.revision": "05",
    "nvidia.com/cuda.driver.major": "550",
    "nvidia.com/cuda.driver.minor": "127",
    "nvidia.com/cuda.driver.rev": "05",
    "nvidia.com/cuda.runtime-version.full": "12.4",
    "nvidia.com/cuda.runtime-version.major": "12",
    "nvidia.com/cuda.runtime-version.minor": "4",
    "nvidia.com/cuda.runtime.major": "12",
    "nvidia.com/cuda.runtime.minor": "4",
    "nvidia.com/gpu.compute.major": "8",
    "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.family": "ampere",
    "nvidia.com/gpu.machine": MACHINE,
    "nvidia.com/gpu.memory": "40960",
    "nvidia.com/gpu.mode": "compute",
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/gpu.replicas": "1",
    "nvidia.com/gpu.sharing-strategy": "none",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mps.capable": "false",
    # No NVIDIA PCI function carries the vGPU signature ("VF" in its vendor capability): not a vGPU guest.
    "nvidia.com/vgpu.present": "false",
}

# sharing.timeSlicing.resources [{name: nvidia.com/gpu, replicas: 4}], renameByDefault false.
WHOLE_TIME_SLICED = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED",
    "nvidia.com/gpu.replicas": "4",
    "nvidia.com/gpu.sharing-strategy": "time-slicing",
}

# sharing.mps.resources [{name: nvidia.com/gpu, replicas: 2}]: no GPU has MIG on, so MPS-capable.
WHOLE_MPS = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-SHARED",
    "nvidia.com/gpu.replicas": "2",
    "nvidia.com/gpu.sharing-strategy": "mps",
    "nvidia.com/mps.capable": "true",
}


def _mig(profile: str, count: int, memory: int, sms: int, gi: int, ci: int, copy: int, decoder: int) -> dict[str, str]:
    """One mixed-strategy resource: the A100's MIG profiles have no encoder, and JPEG/OFA only in 7g and +me."""
    prefix = "nvidia.com/mig-" + profile
    return {
        prefix + ".count": str(count),
        prefix + ".engines.copy": str(copy),
        prefix + ".engines.decoder": str(decoder),
        prefix + ".engines.encoder": "0",
        prefix + ".engines.jpeg": "0",
        prefix + ".engines.ofa": "0",
        prefix + ".memory": str(memory),
        prefix + ".multiprocessors": str(sms),
        prefix + ".product": "NVIDIA-A100-SXM4-40GB-MIG-" + profile,
        prefix + ".replicas": "1",
        prefix + ".sharing-strategy": "none",
        prefix + ".slices.ci": str(ci),
        prefix + ".slices.gi": str(gi),
    }


# Mixed strategy on dgx-a100-mig-mixed. nvidia.com/gpu.*: GPUs 4-7 (MIG off) are labelled after 0-3 and win:
# count 8 (every GPU of the name), replicas 1. Profile names: 4864/9856/19968 MiB of 40960 MiB is
# 0.119/0.241/0.488, rounded up to eighths 1/8, 2/8, 4/8, times 40 GiB: 5, 10, 20 GB; GPU 2's one-slice
# compute instances in a 3-slice GPU instance are 1c.3g.20gb.
MIXED = dict(
    WHOLE,
    **{"nvidia.com/mig.strategy": "mixed"},
    **_mig("1g.5gb", count=2 + 7, memory=4864, sms=14, gi=1, ci=1, copy=1, decoder=0),
    **_mig("2g.10gb", count=1, memory=9856, sms=28, gi=2, ci=2, copy=2, decoder=1),
    **_mig("3g.20gb", count=1, memory=19968, sms=42, gi=3, ci=3, copy=3, decoder=2),
    **_mig("1c.3g.20gb", count=3, memory=19968, sms=14, gi=3, ci=1, copy=3, decoder=2),
)

# Single strategy on dgx-a100-mig-mixed: GPU 3 has MIG on but no devices, and GPUs 4-7 have MIG off, so
# GFD's invalid labeller overwrites the resource labels of nvidia.com/gpu (family and compute stay).
SINGLE_INVALID = dict(
    WHOLE,
    **{
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-INVALID",
        "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.replicas": "0",
        "nvidia.com/gpu.sharing-strategy": "",
        "nvidia.com/gpu.memory": "0",
    },
)

# Single strategy with every GPU cut into 7 x 1g.5gb (UNIFORM_FIXTURE): the 56 MIG devices are nvidia.com/gpu.
SINGLE = dict(
    WHOLE,
    **{
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/gpu.count": "56",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "4864",
        "nvidia.com/gpu.multiprocessors": "14",
        "nvidia.com/gpu.slices.gi": "1",
        "nvidia.com/gpu.slices.ci": "1",
        "nvidia.com/gpu.engines.copy": "1",
        "nvidia.com/gpu.engines.decoder": "0",
        "nvidia.com/gpu.engines.encoder": "0",
        "nvidia.com/gpu.engines.jpeg": "0",
        "nvidia.com/gpu.engines.ofa": "0",
    },
)

_SEVEN = "\n".join("      - {{profile: 1g.5gb, start: {0}, cis: [{{profile: 1g.5gb}}]}}".format(start) for start in range(7))
UNIFORM_FIXTURE = """---
name: dgx-a100-7x1g
description: DGX A100 320GB, every GPU cut into 7 x 1g.5gb
system:
  driver_version: "550.127.05"
  cuda_driver_version: 12040
  nvml_version: "12.550.127.05"
  driver_loaded: true
  libcuda: true
bus_ids: ["00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
          "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0"]
gpus:
  - model: a100-sxm4-40gb
    count: 8
    persistence: 1
    mig: 0
overrides:
""" + "".join("  {0}:\n    mig: 1\n    gis:\n{1}\n".format(index, _SEVEN) for index in range(8))
