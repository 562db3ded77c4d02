#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: nvml_info
short_description: Gather NVIDIA driver, GPU and MIG facts through NVML
version_added: 0.1.0
description:
  - Loads the NVIDIA Management Library (C(libnvidia-ml.so.1)) with the target's own Python and reports the driver,
    NVML and CUDA driver versions, every GPU (identity, PCI ids, memory, architecture, compute capability, persistence
    mode, compute processes) and its MIG state (current and pending mode, GPU instances, compute instances, MIG
    devices).
  - No Python package is needed on the target; the module talks to NVML through C(ctypes).
  - A host without the NVIDIA user-space library, or with the library but no loaded kernel module (an image being
    baked by Packer, a host before its first reboot), is not an error. The module succeeds and says so in
    RV(nvml.status), RV(nvml.driver_loaded) and RV(nvml.reason).
  - A query that the GPU or driver does not support (C(NVML_ERROR_NOT_SUPPORTED), or a symbol missing from an older
    driver) leaves that field V(null) (lists empty, RV(nvml.gpus[].mig.capable=false) for MIG). Any other NVML error
    fails the task with a message that names the NVML function, the GPU and the NVML error, and still returns the
    data gathered up to that point in RV(nvml).
  - A GPU that fell off the bus (C(NVML_ERROR_GPU_IS_LOST) from any call on it, or C(NVML_ERROR_UNKNOWN) from
    C(nvmlDeviceGetHandleByIndex_v2)) does not fail the task. It is reported with RV(nvml.gpus[].lost=true) and
    what was read before, and the next GPU is read.
  - With O(gather_health=true) each GPU also reports its hardware health in RV(nvml.gpus[].health). A health read
    that the GPU or driver cannot answer, that needs more privileges (C(NVML_ERROR_NO_PERMISSION)) or that has no
    data yet (C(NVML_ERROR_NO_DATA)) is V(null).
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.info_module
  - gpufleet.nvidia.attributes.action_group_nvml
options:
  library:
    description:
      - The NVML shared library to load.
      - By default C(libnvidia-ml.so.1) is found by the dynamic loader, exactly as C(nvidia-smi) finds it.
      - Give a path to use a library outside the loader's search path.
    type: path
  gather_mig_profiles:
    description:
      - Also report, for each MIG-capable GPU, the GPU-instance profiles it offers and their possible placements
        in RV(nvml.gpus[].mig.profiles).
      - Listing placements needs a privileged user; use C(become=true).
      - Some drivers only report profiles while MIG mode is enabled on the GPU; driver 580 on an H100 reports them
        with MIG disabled too.
    type: bool
    default: false
  gather_health:
    description:
      - Also read each GPU's hardware health (ECC errors, retired pages, remapped rows, the driver's recovery
        action, PCIe link, NVLink, fabric, temperature, clock event reasons, power) into RV(nvml.gpus[].health).
      - The values are reported as NVML gives them; the verify role judges them.
    type: bool
    default: true
  fabric_wait:
    description:
      - With O(gather_health=true), how many seconds to wait for GPUs whose NVLink fabric registration has not
        finished (state C(not_started) or C(in_progress)). They are read again every 2 seconds until it has, or
        until this time is up. Fabric Manager registers the GPUs after boot, and CUDA cannot use them until then.
      - V(0) reads each GPU once.
      - A GPU that was waited for reports the seconds in RV(nvml.gpus[].health.fabric.waited_s).
    type: int
    default: 0
  run_read:
    description:
      - Whether this is the run's shared read of the node, which the collection's roles make once per run.
      - V(own) reads the node and keeps nothing.
      - V(shared) returns the read this run already holds of the node (RV(run_read=held), no call to the node), or
        reads it and keeps it as the run's. It takes no other option than O(library), since the run's read is made
        with the defaults.
      - V(fresh) reads the node and keeps the read as the run's, replacing what the run held.
      - M(gpufleet.nvidia.run_state) forgets the run's read after a change that makes it stale. The run's read is a
        host fact that names its run (see M(gpufleet.nvidia.run_state)); this option is handled by the collection's
        action plugin, on the controller.
    type: str
    choices: [own, shared, fresh]
    default: own
notes:
  - Run with C(become=true) to see everything; some NVML queries (MIG placements and instances) need root.
  - The module never changes the GPU; it is safe on shared machines.
requirements:
  - Python 3.8 or later on the target (standard library only).
  - The NVIDIA user-space driver (C(libnvidia-ml.so.1)) for anything beyond RV(nvml.status=library_not_found).
seealso:
  - name: NVML API reference
    description: The NVIDIA Management Library calls this module makes.
    link: https://docs.nvidia.com/deploy/nvml-api/index.html
  - name: MIG user guide
    description: GPU instances, compute instances, profiles and placements.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
"""

EXAMPLES = r"""
- name: Gather NVML facts
  gpufleet.nvidia.nvml_info:
  become: true
  register: gpu

- name: Print a one-line summary per GPU
  ansible.builtin.debug:
    msg: >-
      GPU {{ item.index }} {{ item.name }} {{ item.uuid }}
      {{ item.memory_total_mib }} MiB, {{ item.architecture }} (CC {{ item.compute_capability }}),
      MIG {{ 'on' if item.mig.enabled else 'off' }}{{ ' (change pending)' if item.mig.pending_change else '' }}
  loop: "{{ gpu.nvml.gpus }}"
  loop_control:
    label: "{{ item.index }}"

- name: Defer GPU work to first boot when the driver is not running (image bake)
  ansible.builtin.debug:
    msg: "No NVIDIA driver running: {{ gpu.nvml.reason }}"
  when: not gpu.nvml.driver_loaded

- name: Reboot when the running kernel module and the installed driver disagree
  ansible.builtin.reboot:
  become: true
  when: gpu.nvml.status == 'version_mismatch'

- name: Also list MIG profiles and placements (needs root)
  gpufleet.nvidia.nvml_info:
    gather_mig_profiles: true
  become: true
  register: gpu_profiles

- name: Use a library outside the loader path
  gpufleet.nvidia.nvml_info:
    library: /opt/nvidia/lib64/libnvidia-ml.so.1
  register: gpu_custom
"""

RETURN = r"""
run_read:
  description:
    - With O(run_read=shared) or O(run_read=fresh), V(held) when the run's read was returned without asking the node,
      V(read) when the node was read and the read kept as the run's.
  returned: when O(run_read) is not V(own)
  type: str
  sample: held
nvml:
  description:
    - Everything the module found.
    - Also returned when the module fails; it then holds what was read before the failure.
  returned: always
  type: dict
  contains:
    status:
      description:
        - V(ok) when NVML initialized.
        - V(library_not_found) when the NVML library could not be loaded (or NVML reported C(LIBRARY_NOT_FOUND)).
        - V(driver_not_loaded) when the library loaded but the nvidia kernel module is not running.
        - V(version_mismatch) when the running kernel module and the installed user-space driver differ
          (reboot or reload the modules).
      type: str
      returned: always
      choices: [ok, library_not_found, driver_not_loaded, version_mismatch]
      sample: ok
    driver_loaded:
      description: Whether an nvidia kernel module is running (V(true) for V(ok) and V(version_mismatch)).
      type: bool
      returned: always
      sample: true
    reason:
      description:
        - Why RV(nvml.status) is not V(ok), with the loader's or NVML's own message.
        - When NVML initialization fails for another reason (the module then fails), the failure message.
        - V(null) otherwise.
      type: str
      returned: always
      sample: "nvmlInit_v2: Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED); the nvidia kernel module is not loaded"
    library:
      description: The library that was loaded or that loading was attempted from.
      type: str
      returned: always
      sample: libnvidia-ml.so.1
    driver_version:
      description: The NVIDIA driver version; V(null) when NVML is not usable.
      type: str
      returned: always
      sample: 550.127.05
    nvml_version:
      description: The NVML library version; V(null) when NVML is not usable.
      type: str
      returned: always
      sample: 12.550.127.05
    cuda_driver_version:
      description:
        - The CUDA version the driver supports, as C(major.minor); V(null) when NVML is not usable.
        - Taken from C(libcuda) when it is installed, else NVML's built-in value.
      type: str
      returned: always
      sample: "12.4"
    gpu_count:
      description: The number of GPUs NVML sees (MIG devices not counted).
      type: int
      returned: always
      sample: 8
    gpus:
      description: One entry per GPU, in NVML index order. Fields NVML cannot report are V(null).
      type: list
      elements: dict
      returned: always
      contains:
        index:
          description: The NVML device index.
          type: int
          returned: always
          sample: 0
        name:
          description: The product name.
          type: str
          returned: always
          sample: NVIDIA A100-SXM4-40GB
        uuid:
          description: The GPU UUID.
          type: str
          returned: always
          sample: GPU-4a6b1c2d-0000-1111-2222-333344445555
        serial:
          description: The board serial number.
          type: str
          returned: always
          sample: "1562720012345"
        board_part_number:
          description: The board part number.
          type: str
          returned: always
          sample: 692-2G506-0200-002
        minor_number:
          description: The minor number of C(/dev/nvidiaN).
          type: int
          returned: always
          sample: 0
        pci:
          description: PCI location and ids; V(null) when NVML cannot report them.
          type: dict
          returned: always
          contains:
            bus_id:
              description: The PCI bus id, C(domain:bus:device.function).
              type: str
              returned: always
              sample: "00000000:07:00.0"
            domain:
              description: The PCI domain.
              type: int
              returned: always
              sample: 0
            bus:
              description: The PCI bus.
              type: int
              returned: always
              sample: 7
            device:
              description: The PCI device number on the bus.
              type: int
              returned: always
              sample: 0
            device_id:
              description: The combined 16-bit device id and 16-bit vendor id, as mig-parted's C(device-filter) uses it.
              type: str
              returned: always
              sample: "0x20B010DE"
            subsystem_id:
              description: The 32-bit subsystem id.
              type: str
              returned: always
              sample: "0x134F10DE"
        memory_total_mib:
          description: Total framebuffer memory in MiB.
          type: int
          returned: always
          sample: 40960
        memory_total_bytes:
          description:
            - Total framebuffer memory in bytes, as NVML reports it.
            - GPU Feature Discovery names a MIG profile's memory from it (go-nvlib rounds the MIG device's share of
              it), which RV(nvml.gpus[].memory_total_mib) rounded down cannot always reproduce.
          type: int
          returned: always
          sample: 42949672960
        architecture:
          description: The GPU architecture, V(unknown) when NVML does not report a known one.
          type: str
          returned: always
          choices: [kepler, maxwell, pascal, volta, turing, ampere, ada, hopper, blackwell, rubin, unknown]
          sample: ampere
        architecture_id:
          description: The raw C(nvmlDeviceArchitecture_t) value.
          type: int
          returned: always
          sample: 7
        compute_capability:
          description: The CUDA compute capability, C(major.minor).
          type: str
          returned: always
          sample: "8.0"
        persistence_mode:
          description: Whether persistence mode is on; V(null) where it is not supported.
          type: bool
          returned: always
          sample: true
        mig:
          description: MIG state of the GPU.
          type: dict
          returned: always
          contains:
            capable:
              description: Whether the GPU supports MIG.
              type: bool
              returned: always
              sample: true
            enabled:
              description: The current MIG mode.
              type: bool
              returned: always
              sample: true
            pending_enabled:
              description: The MIG mode after the next GPU reset or reboot.
              type: bool
              returned: always
              sample: true
            pending_change:
              description: V(true) when the pending mode differs from the current one (a reset or reboot is needed).
              type: bool
              returned: always
              sample: false
            gpu_instances:
              description: Existing GPU instances, sorted by id. Empty when MIG is off.
              type: list
              elements: dict
              returned: always
              contains:
                id:
                  description: The GPU instance id.
                  type: int
                  returned: always
                  sample: 1
                profile_id:
                  description: The GPU-instance profile id (not the C(NVML_GPU_INSTANCE_PROFILE_*) index).
                  type: int
                  returned: always
                  sample: 9
                profile_index:
                  description: The C(NVML_GPU_INSTANCE_PROFILE_*) index of the instance's profile.
                  type: int
                  returned: always
                  sample: 2
                profile_name:
                  description: The profile name; V(null) on drivers without the versioned profile call.
                  type: str
                  returned: always
                  sample: 3g.20gb
                placement:
                  description: The memory slices the instance occupies.
                  type: dict
                  returned: always
                  contains:
                    start:
                      description: The first memory slice.
                      type: int
                      returned: always
                      sample: 0
                    size:
                      description: The number of memory slices.
                      type: int
                      returned: always
                      sample: 4
                compute_instances:
                  description: The compute instances inside this GPU instance, sorted by id.
                  type: list
                  elements: dict
                  returned: always
                  contains:
                    id:
                      description: The compute instance id, unique within its GPU instance.
                      type: int
                      returned: always
                      sample: 0
                    profile_id:
                      description: The compute-instance profile id.
                      type: int
                      returned: always
                      sample: 2
                    profile_index:
                      description: The C(NVML_COMPUTE_INSTANCE_PROFILE_*) index of the instance's profile.
                      type: int
                      returned: always
                      sample: 2
                    placement:
                      description: The compute slices the instance occupies within its GPU instance.
                      type: dict
                      returned: always
                      contains:
                        start:
                          description: The first compute slice.
                          type: int
                          returned: always
                          sample: 0
                        size:
                          description: The number of compute slices.
                          type: int
                          returned: always
                          sample: 3
            devices:
              description: MIG devices (one per compute instance), sorted by GPU and compute instance id.
              type: list
              elements: dict
              returned: always
              contains:
                uuid:
                  description: The MIG device UUID.
                  type: str
                  returned: always
                  sample: MIG-8d2b1d3c-0000-1111-2222-333344445555
                name:
                  description: The MIG device name.
                  type: str
                  returned: always
                  sample: NVIDIA A100-SXM4-40GB MIG 3g.20gb
                gpu_instance_id:
                  description: The GPU instance it belongs to.
                  type: int
                  returned: always
                  sample: 1
                compute_instance_id:
                  description: The compute instance it stands for.
                  type: int
                  returned: always
                  sample: 0
                memory_total_mib:
                  description: The memory of the MIG device in MiB.
                  type: int
                  returned: always
                  sample: 19968
                attributes:
                  description:
                    - What the MIG device gets of its GPU (C(nvmlDeviceGetAttributes)), as GPU Feature Discovery
                      labels it; V(null) when NVML cannot tell.
                  type: dict
                  returned: always
                  contains:
                    multiprocessor_count:
                      description: Streaming multiprocessors of the compute instance.
                      type: int
                      sample: 14
                    shared_copy_engine_count:
                      description: Copy engines.
                      type: int
                      sample: 1
                    shared_decoder_count:
                      description: Video decoders.
                      type: int
                      sample: 0
                    shared_encoder_count:
                      description: Video encoders.
                      type: int
                      sample: 0
                    shared_jpeg_count:
                      description: JPEG decoders.
                      type: int
                      sample: 0
                    shared_ofa_count:
                      description: Optical flow accelerators.
                      type: int
                      sample: 0
                    gpu_instance_slice_count:
                      description: Compute slices of the GPU instance.
                      type: int
                      sample: 1
                    compute_instance_slice_count:
                      description: Compute slices of the compute instance.
                      type: int
                      sample: 1
                    memory_size_mb:
                      description: Memory of the GPU instance in MiB.
                      type: int
                      sample: 4864
            profiles:
              description:
                - GPU-instance profiles the GPU offers, sorted by index.
                - Empty when the driver reports none (most drivers only report them with MIG enabled).
              type: list
              elements: dict
              returned: when O(gather_mig_profiles=true)
              contains:
                index:
                  description: The C(NVML_GPU_INSTANCE_PROFILE_*) index.
                  type: int
                  returned: always
                  sample: 2
                id:
                  description: The profile id that placements and instances refer to.
                  type: int
                  returned: always
                  sample: 9
                name:
                  description: The profile name; V(null) on drivers without the versioned profile call.
                  type: str
                  returned: always
                  sample: 3g.20gb
                slices:
                  description: The number of compute slices.
                  type: int
                  returned: always
                  sample: 3
                instances:
                  description: How many instances of this profile fit on an empty GPU.
                  type: int
                  returned: always
                  sample: 2
                memory_mib:
                  description: Memory of one instance in MiB.
                  type: int
                  returned: always
                  sample: 19968
                placements:
                  description: Every possible placement, in memory slices, sorted by start.
                  type: list
                  elements: dict
                  returned: always
                  contains:
                    start:
                      description: The first memory slice.
                      type: int
                      returned: always
                      sample: 0
                    size:
                      description: The number of memory slices.
                      type: int
                      returned: always
                      sample: 4
        processes:
          description: Compute processes on the GPU, sorted by pid; empty when there are none or NVML cannot tell.
          type: list
          elements: dict
          returned: always
          contains:
            pid:
              description: The process id (in the host's PID namespace).
              type: int
              returned: always
              sample: 4242
            used_memory_mib:
              description: GPU memory the process uses, in MiB; V(null) when NVML cannot tell.
              type: int
              returned: always
              sample: 1024
            gpu_instance_id:
              description: The GPU instance the process runs in; V(null) outside MIG.
              type: int
              returned: always
              sample: 1
            compute_instance_id:
              description: The compute instance the process runs in; V(null) outside MIG.
              type: int
              returned: always
              sample: 0
        lost:
          description:
            - V(true) when the GPU fell off the bus (NVML answered C(NVML_ERROR_GPU_IS_LOST) for it, or
              C(NVML_ERROR_UNKNOWN) for its handle).
            - The GPU keeps its index and whatever was read before; the other fields keep their defaults.
          type: bool
          returned: always
          sample: false
        health:
          description:
            - The GPU's hardware health as NVML reports it. Each leaf is V(null) when the GPU or driver cannot
              answer (C(NOT_SUPPORTED), a call missing from an older driver, C(NO_PERMISSION), C(NO_DATA)).
            - Every leaf is V(null) (lists empty) for a lost GPU.
          type: dict
          returned: when O(gather_health=true)
          contains:
            ecc:
              description: ECC mode and error counts (C(nvmlDeviceGetEccMode), C(nvmlDeviceGetTotalEccErrors)).
              type: dict
              returned: always
              contains:
                mode_current:
                  description: Whether ECC is on now.
                  type: bool
                  returned: always
                  sample: true
                mode_pending:
                  description: Whether ECC is on after the next reboot.
                  type: bool
                  returned: always
                  sample: true
                volatile:
                  description: Errors since the driver was loaded; V(null) counts when ECC is off.
                  type: dict
                  returned: always
                  contains:
                    corrected:
                      description: Corrected (single-bit) errors.
                      type: int
                      returned: always
                      sample: 0
                    uncorrected:
                      description: Uncorrected (double-bit) errors.
                      type: int
                      returned: always
                      sample: 0
                aggregate:
                  description: Errors over the lifetime of the GPU; V(null) counts when ECC is off.
                  type: dict
                  returned: always
                  contains:
                    corrected:
                      description: Corrected (single-bit) errors.
                      type: int
                      returned: always
                      sample: 0
                    uncorrected:
                      description: Uncorrected (double-bit) errors.
                      type: int
                      returned: always
                      sample: 0
            retired_pages:
              description:
                - Dynamic page retirement (C(nvmlDeviceGetRetiredPages), C(nvmlDeviceGetRetiredPagesPendingStatus)).
                - Pre-Ampere GPUs; V(null) on GPUs that remap rows instead.
              type: dict
              returned: always
              contains:
                single_bit_ecc:
                  description: Pages retired (or pending retirement) for multiple single-bit errors.
                  type: int
                  returned: always
                  sample: 0
                double_bit_ecc:
                  description: Pages retired (or pending retirement) for a double-bit error.
                  type: int
                  returned: always
                  sample: 0
                pending:
                  description: Whether a retirement waits for a reboot.
                  type: bool
                  returned: always
                  sample: false
            remapped_rows:
              description:
                - Row remapping (C(nvmlDeviceGetRemappedRows)); Ampere and later.
                - V(null) on older GPUs, and while MIG instances exist (NVML does not answer then).
              type: dict
              returned: always
              contains:
                correctable:
                  description: Rows remapped for correctable errors.
                  type: int
                  returned: always
                  sample: 0
                uncorrectable:
                  description: Rows remapped for uncorrectable errors.
                  type: int
                  returned: always
                  sample: 0
                pending:
                  description: Whether a remap waits for a GPU reset.
                  type: bool
                  returned: always
                  sample: false
                failure:
                  description: Whether a remap has ever failed (the GPU needs repair).
                  type: bool
                  returned: always
                  sample: false
            recovery_action:
              description:
                - The action the driver asks for (field C(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION), 230).
                - V(0) none, V(1) reset the GPU, V(2) reboot the node, V(3) drain peer-to-peer traffic, V(4) drain
                  and reset, V(5) recover the IMEX domain (C(nvmlDeviceGpuRecoveryAction_t)).
                - V(null) where the driver does not have the field.
              type: int
              returned: always
              sample: 0
            pcie:
              description: The PCIe link (C(nvmlDeviceGet{Curr,Max}PcieLink{Generation,Width}), C(nvmlDeviceGetPcieReplayCounter)).
              type: dict
              returned: always
              contains:
                gen_current:
                  description: The link generation now; it drops while the GPU idles to save power.
                  type: int
                  returned: always
                  sample: 5
                gen_max:
                  description: The highest generation this GPU and this system allow.
                  type: int
                  returned: always
                  sample: 5
                width_current:
                  description: The link width now (lanes).
                  type: int
                  returned: always
                  sample: 16
                width_max:
                  description: The widest link this GPU and this system allow (lanes).
                  type: int
                  returned: always
                  sample: 16
                replay_counter:
                  description: PCIe replays since the driver was loaded.
                  type: int
                  returned: always
                  sample: 0
            nvlink:
              description:
                - The state of each NVLink link (C(nvmlDeviceGetNvLinkState)), sorted by link.
                - Links NVML does not answer for are left out; empty for a GPU without NVLink.
              type: list
              elements: dict
              returned: always
              contains:
                link:
                  description: The link index.
                  type: int
                  returned: always
                  sample: 0
                active:
                  description: Whether the link is up.
                  type: bool
                  returned: always
                  sample: true
            fabric:
              description:
                - The GPU's registration with the NVLink fabric (C(nvmlDeviceGetGpuFabricInfoV)); Hopper and later
                  with NVSwitches.
                - V(null) where the GPU or driver has no fabric.
              type: dict
              returned: always
              contains:
                state:
                  description: The fabric probe state.
                  type: str
                  returned: always
                  choices: [not_supported, not_started, in_progress, completed, unknown]
                  sample: completed
                status:
                  description: The probe's NVML return code by name once the probe completed, else V(null).
                  type: str
                  returned: always
                  sample: NVML_SUCCESS
                clique_id:
                  description: The fabric clique the GPU belongs to once the probe completed, else V(null).
                  type: int
                  returned: always
                  sample: 32766
                cluster_uuid:
                  description: The UUID of the fabric cluster once the probe completed, else V(null).
                  type: str
                  returned: always
                  sample: 7a4f3c1e-0000-1111-2222-333344445555
                waited_s:
                  description:
                    - The seconds O(fabric_wait) waited for this GPU's registration to finish, whether it finished
                      or not; V(null) where the module did not wait for it.
                  type: int
                  returned: always
                  sample: 12
            temperature:
              description: Degrees Celsius (C(nvmlDeviceGetTemperatureV), C(nvmlDeviceGetTemperatureThreshold)).
              type: dict
              returned: always
              contains:
                current_c:
                  description: The GPU die temperature now.
                  type: int
                  returned: always
                  sample: 34
                slowdown_c:
                  description: The temperature at which the GPU slows down.
                  type: int
                  returned: always
                  sample: 87
                shutdown_c:
                  description: The temperature at which the GPU shuts down.
                  type: int
                  returned: always
                  sample: 92
            clock_event_reasons:
              description: Why the clocks are below their maximum now (C(nvmlDeviceGetCurrentClocksEventReasons)).
              type: dict
              returned: always
              contains:
                mask:
                  description: The raw C(nvmlClocksEventReason*) bit mask.
                  type: int
                  returned: always
                  sample: 1
                active:
                  description: The names of the bits set in RV(nvml.gpus[].health.clock_event_reasons.mask), in bit order.
                  type: list
                  elements: str
                  returned: always
                  sample: [gpu_idle]
            power:
              description: Power in watts (C(nvmlDeviceGetPowerUsage), C(nvmlDeviceGetEnforcedPowerLimit)).
              type: dict
              returned: always
              contains:
                draw_w:
                  description: The power drawn now (a one-second average on Ampere and later except GA100).
                  type: float
                  returned: always
                  sample: 71.234
                limit_w:
                  description: The limit the driver enforces after every limiter.
                  type: float
                  returned: always
                  sample: 700.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml.facts import NvmlFactsCollector, NvmlFactsError

# The module's options; its action plugin (plugins/action/nvml_info.py) takes the same ones.
ARGUMENT_SPEC = dict(
    library=dict(type="path"),
    gather_mig_profiles=dict(type="bool", default=False),
    gather_health=dict(type="bool", default=True),
    fabric_wait=dict(type="int", default=0),
    # Handled by the action plugin; the module reads the node either way.
    run_read=dict(type="str", default="own", choices=["own", "shared", "fresh"]),
)


def main() -> None:
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    if module.params["fabric_wait"] < 0:
        module.fail_json(msg="fabric_wait is {0}: give the seconds to wait, or 0 not to wait".format(module.params["fabric_wait"]))
    collector = NvmlFactsCollector(
        library=module.params["library"],
        gather_mig_profiles=module.params["gather_mig_profiles"],
        gather_health=module.params["gather_health"],
        fabric_wait=module.params["fabric_wait"],
    )
    try:
        facts = collector.collect()
    except NvmlFactsError as exc:
        module.fail_json(msg=str(exc), nvml=collector.facts)
    module.exit_json(changed=False, nvml=facts)


if __name__ == "__main__":
    main()
