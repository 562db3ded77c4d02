#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: mig_config
short_description: Apply or assert a MIG layout from a mig-parted config
version_added: 0.1.0
description:
  - Takes a config in nvidia-mig-parted's C(version=v1) format (the format of C(nvidia-mig-parted) and of the GPU
    Operator's MIG ConfigMaps) and one of its labels, and makes the node's GPUs match it through NVML, or checks that
    they do.
  - The config is validated like mig-parted validates it (unknown keys are rejected), then against the profiles and
    placements each GPU really offers, as NVML reports them. For a GPU whose MIG mode is still off, NVML describes no
    profiles; the module then plans from a built-in table of known MIG GPUs (A30, A100, H100, H20, H200, GH200, B200,
    GB200, RTX PRO 6000) and plans again from NVML's answer once MIG is on.
  - The plan is the smallest change. GPU instances that already fit the layout are kept, the others destroyed, and
    the missing ones created with an explicit placement, each with its default compute instance (or the compute
    instances a C(<c>c.<profile>) entry asks for). A layout that cannot fit fails before anything is changed, with
    the reason (too many instances of a profile, not enough compute or memory slices, placements that overlap, a
    profile the GPU lacks).
  - Processes still attached to a GPU that must change make the module fail before anything is changed, naming
    them. Stop the GPU's clients first (the C(gpufleet.nvidia.mig) role does).
  - A MIG mode change that needs a GPU reset or a reboot (NVML's C(RESET_REQUIRED); typical of Ampere GPUs in VMs) is
    requested and reported in RV(reset_required) and RV(reset_gpus); the instances of those GPUs are created by the
    next run after the reset.
  - When an NVML call fails part-way, the module fails with the failed step, what it had already done (RV(done))
    and what it had not (RV(not_done)). Nothing is rolled back except a MIG mode it had just switched on; a second run
    plans from what is on the GPUs and converges.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.action_group_nvml
options:
  config:
    description:
      - The mig-parted config, inline (C(version) and C(mig-configs)).
      - Exactly one of O(config) and O(config_file) is required.
    type: dict
  config_file:
    description:
      - A mig-parted config file on the managed node, JSON or YAML (YAML needs PyYAML on the node).
      - Exactly one of O(config) and O(config_file) is required.
    type: path
  label:
    description:
      - The entry of C(mig-configs) to apply or assert, for example C(all-1g.5gb) or C(all-balanced).
    type: str
    required: true
  state:
    description:
      - V(applied) changes the GPUs until they match the label.
      - V(asserted) changes nothing and fails when a GPU differs, with one line per GPU
        (for example C(GPU 3 - expected MIG enabled, 7 x 1g.5gb, found MIG disabled)).
    type: str
    choices: [applied, asserted]
    default: applied
  library:
    description:
      - The NVML shared library to load; by default C(libnvidia-ml.so.1) from the dynamic loader's path.
    type: path
notes:
  - Needs root (C(become=true)). Placements, creating and destroying instances and switching MIG mode are privileged
    NVML calls.
  - GPUs that no entry of the label selects are left alone. A GPU without MIG is left alone when the entry selects
    C(devices=all), as mig-parted does; an entry that asks for MIG and reaches no MIG-capable GPU at all is an error.
  - Two entries that select the same GPU with different layouts are an error (mig-parted would apply the last one and
    then never assert it).
  - In check mode, attached client processes are reported in RV(plan[].clients) and as a warning instead of failing,
    because the caller usually stops them before the real run.
requirements:
  - Python 3.8 or later on the target (standard library only).
  - An NVIDIA driver with NVML (C(libnvidia-ml.so.1)).
seealso:
  - name: nvidia-mig-parted config format
    description: The C(version=v1) format this module reads.
    link: https://github.com/NVIDIA/mig-parted#the-mig-parted-config-file
  - name: MIG user guide
    description: GPU instances, compute instances, profiles and placements.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
  - module: gpufleet.nvidia.nvml_info
"""

EXAMPLES = r"""
- name: Split every A100 into seven 1g.5gb instances
  gpufleet.nvidia.mig_config:
    label: all-1g.5gb
    config:
      version: v1
      mig-configs:
        all-1g.5gb:
          - devices: all
            mig-enabled: true
            mig-devices:
              1g.5gb: 7
  become: true

- name: Apply a label from an existing mig-parted / GPU Operator config on the node
  gpufleet.nvidia.mig_config:
    config_file: /etc/nvidia-mig-manager/config.yaml
    label: all-balanced
  become: true
  register: mig

- name: Reset the GPUs whose new MIG mode waits for a reset
  ansible.builtin.command: nvidia-smi --gpu-reset -i {{ item }}
  loop: "{{ mig.reset_gpus }}"
  changed_when: true
  become: true

- name: Fail unless the layout is in place (changes nothing)
  gpufleet.nvidia.mig_config:
    config_file: /etc/gpufleet/mig/config.json
    label: all-balanced
    state: asserted
  become: true
"""

RETURN = r"""
label:
  description: The label applied or asserted.
  returned: always
  type: str
  sample: all-balanced
plan:
  description:
    - One entry per GPU, in NVML index order, describing the change (planned in check mode and with V(asserted),
      made otherwise).
  returned: when the GPUs could be read
  type: list
  elements: dict
  contains:
    index:
      description: The NVML index of the GPU.
      type: int
      returned: always
      sample: 0
    uuid:
      description: The GPU UUID.
      type: str
      returned: always
      sample: GPU-4a6b1c2d-0000-1111-2222-333344445555
    name:
      description: The product name.
      type: str
      returned: always
      sample: NVIDIA A100-SXM4-40GB
    selected_by:
      description: The config entry that selects this GPU (C(mig-configs.<label>[<n>])), V(null) when none does.
      type: str
      returned: always
      sample: mig-configs.all-balanced[0]
    skipped:
      description: Why a selected GPU is left alone (a GPU without MIG under C(devices=all)), else V(null).
      type: str
      returned: always
      sample: null
    mig_capable:
      description: Whether the GPU supports MIG.
      type: bool
      returned: always
      sample: true
    mig_enabled:
      description: The MIG mode before the change (V(current), V(pending)) and the one the label wants (V(wanted),
        V(null) when the GPU is not managed).
      type: dict
      returned: always
      sample: {current: false, pending: false, wanted: true}
    mode_change:
      description: V(enable), V(disable) or V(null).
      type: str
      returned: always
      sample: enable
    profiles_from:
      description:
        - Where the GPU-instance profiles used for the plan came from. V(nvml) when MIG was on; V(catalogue) (the
          built-in table) or V(none) (an unknown GPU; planned once MIG is on) when it was off.
      type: str
      returned: always
      sample: nvml
    destroy:
      description: GPU instances destroyed (with their compute instances).
      type: list
      elements: dict
      returned: always
      sample: [{gpu_instance_id: 9, profile: 1g.5gb, start: 2, size: 1, compute_instances: [0]}]
    recompute:
      description: GPU instances kept whose compute instances are replaced.
      type: list
      elements: dict
      returned: always
      sample: []
    create:
      description: GPU instances created, with placement and compute instances (MIG device names).
      type: list
      elements: dict
      returned: always
      sample: [{profile: 3g.20gb, profile_id: 9, start: 4, size: 4, compute: [3g.20gb]}]
    steps:
      description: The changes in the order they are made, as text.
      type: list
      elements: str
      returned: always
      sample: ["destroy GPU instance 9 (1g.5gb at memory slice 2)", "create 3g.20gb at memory slice 4"]
    reset_required:
      description: The wanted MIG mode was already requested before this run and waits for a GPU reset or reboot.
      type: bool
      returned: always
      sample: false
    changed:
      description: Whether this GPU needs (or got) a change.
      type: bool
      returned: always
      sample: true
    before:
      description: The GPU's layout before, as MIG device counts.
      type: str
      returned: always
      sample: "MIG enabled: 7 x 1g.5gb"
    after:
      description: The layout the label asks for.
      type: str
      returned: always
      sample: "MIG enabled: 1 x 3g.20gb, 1 x 2g.10gb, 2 x 1g.5gb"
    clients:
      description: Compute processes on the GPU when it was read (pid, name, instance, memory).
      type: list
      elements: str
      returned: always
      sample: ["pid 4242 (python3, 1024 MiB)"]
summary:
  description:
    - One line per GPU with its layout after the run; in check mode the planned layout of each GPU that would
      change, marked C((planned)); with O(state=asserted) the layout as found.
  returned: when the GPUs could be read
  type: list
  elements: str
  sample: ["GPU 0 (NVIDIA A100-SXM4-40GB): MIG enabled: 1 x 3g.20gb, 1 x 2g.10gb, 2 x 1g.5gb"]
reset_required:
  description: At least one GPU's new MIG mode waits for a GPU reset (C(nvidia-smi --gpu-reset -i N)) or a reboot.
  returned: always
  type: bool
  sample: false
reboot_required:
  description:
    - The same condition as RV(reset_required). NVML cannot tell whether the platform allows a GPU reset (bare metal)
      or needs a reboot (GPUs passed through to a VM); try the reset first.
  returned: always
  type: bool
  sample: false
reset_gpus:
  description: The indices of the GPUs waiting for a reset or reboot.
  returned: always
  type: list
  elements: int
  sample: []
done:
  description: "The changes made, in order, as C(GPU <n>: <step>) (also when the module fails part-way)."
  returned: when O(state=applied) and not in check mode
  type: list
  elements: str
  sample: ["GPU 1: destroy GPU instance 9 (1g.5gb at memory slice 2)", "GPU 1: create 3g.20gb at memory slice 4"]
not_done:
  description: The planned changes not made because an earlier one failed.
  returned: when an NVML call failed part-way
  type: list
  elements: str
  sample: ["GPU 2: create 1g.5gb at memory slice 0"]
differences:
  description: With O(state=asserted), one line per GPU that does not match the label.
  returned: when O(state=asserted)
  type: list
  elements: str
  sample: ["GPU 3: expected MIG enabled: 7 x 1g.5gb, found MIG disabled"]
"""

import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig import (
    MigApplyError,
    MigConfigError,
    MigController,
    MigPlanError,
    NodePlan,
    describe_gpu,
    gpu_layout,
    layout_lines,
    load_config_file,
    parse_config,
    plan_to_dict,
    select_label,
)
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import (
    DEFAULT_LIBRARY,
    NvmlError,
    NvmlLibraryNotFoundError,
    NvmlSession,
)


class MigConfigManager:
    """Desired (a config label) vs actual (the GPUs through NVML), and the change between them."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params
        self.result: dict[str, t.Any] = {
            "changed": False, "label": self.params["label"], "reset_required": False, "reboot_required": False,
            "reset_gpus": [],
        }

    def fail(self, msg: str, **extra: t.Any) -> t.NoReturn:
        self.result.update(extra)
        self.module.fail_json(msg=msg, **self.result)

    def entries(self) -> t.Any:
        data = self.params["config"]
        if data is None:
            data = load_config_file(self.params["config_file"])
        return select_label(parse_config(data), self.params["label"])

    def run(self) -> dict[str, t.Any]:
        try:
            entries = self.entries()
        except MigConfigError as exc:
            self.fail("invalid MIG config: {0}".format(exc))
        library = self.params["library"] or DEFAULT_LIBRARY
        try:
            session = NvmlSession(library)
        except NvmlLibraryNotFoundError as exc:
            self.fail("NVML cannot be loaded from {0}: {1}; {2}. On an image being built without a GPU, install "
                      "the boot unit instead (gpufleet.nvidia.mig with mig_bake: true)".format(library, exc.text, exc.hint))
        try:
            session.init()
        except NvmlError as exc:
            self.fail("NVML is not usable: {0}".format(exc))
        try:
            self._run(MigController(entries, self.params["label"], session))
        finally:
            try:
                session.shutdown()
            except NvmlError as exc:
                self.module.warn("nvmlShutdown failed: {0}".format(exc))
        return self.result

    def _run(self, controller: MigController) -> None:
        try:
            node = controller.plan()
        except MigPlanError as exc:
            self.fail("the MIG layout {0!r} cannot be applied: {1}".format(self.params["label"], exc))
        except NvmlError as exc:
            self.fail("reading the GPUs failed: {0}".format(exc))
        self.result["plan"] = [plan_to_dict(p) for p in node.plans]
        self._reset(node.reset_gpus)
        if self.params["state"] == "asserted":
            self._assert(node)
        elif self.module.check_mode:
            self._predict(node)
        else:
            self._apply(controller, node)

    def _reset(self, gpus: t.Sequence[int]) -> None:
        self.result.update(reset_required=bool(gpus), reboot_required=bool(gpus), reset_gpus=sorted(set(gpus)))

    def _summary(self, plans: t.Any, states: t.Mapping[int, t.Any] | None = None) -> list[str]:
        lines = []
        for plan in plans:
            gpu = states.get(plan.gpu.index, plan.gpu) if states else plan.gpu
            lines.append("{0}: {1}".format(gpu.label, describe_gpu(gpu)))
        return lines

    def _diff(self, node: NodePlan, after: t.Callable[[t.Any], list[str]]) -> None:
        if self.module._diff:
            before = [line for p in node.plans for line in layout_lines(p.gpu, (p.gpu.mig_enabled, p.gpu.mig_pending),
                                                                        gpu_layout(p.gpu))]
            self.result["diff"] = {"before": "\n".join(before) + "\n",
                                   "after": "\n".join(line for p in node.plans for line in after(p)) + "\n"}

    def _assert(self, node: NodePlan) -> None:
        differences = node.differences()
        self.result["differences"] = differences
        self.result["summary"] = self._summary(node.plans)
        if differences:
            self.fail("the MIG layout {0!r} is not applied: {1}".format(self.params["label"], "; ".join(differences)))

    def _predict(self, node: NodePlan) -> None:
        clients = node.clients_in_the_way()
        if clients:
            self.module.warn("client processes would block the change (stop them before applying): "
                             + "; ".join(clients))
        self.result["changed"] = node.changed
        self.result["summary"] = [
            "{0}: {1}".format(p.gpu.label, "{0} (planned)".format(plan_to_dict(p)["after"]) if p.changed
                              else describe_gpu(p.gpu))
            for p in node.plans]
        self._diff(node, lambda p: layout_lines(p.gpu, p.mig_after(), p.layout_after()))

    def _apply(self, controller: MigController, node: NodePlan) -> None:
        clients = node.clients_in_the_way()
        if clients:
            self.fail("GPU clients are still attached, so nothing was changed. Stop them (for services, list them "
                      "in mig_gpu_clients) and run again: " + "; ".join(clients))
        if not node.changed:
            self.result["done"] = []
            self.result["summary"] = self._summary(node.plans)
            return
        try:
            applier = controller.apply(node)
        except MigApplyError as exc:
            self.result.update(changed=bool(exc.done), done=exc.done, not_done=exc.not_done)
            advice = ("Run again to converge: the next run plans from what is on the GPUs now." if exc.converges else
                      "Running again will not help: the driver reports other MIG profiles for this GPU than "
                      "gpufleet's table of known GPUs, and the layout does not fit them; change the config.")
            self.fail("{0}. Done before the failure: {1}. Not done: {2}. {3}".format(
                exc, "; ".join(exc.done) or "nothing", "; ".join(exc.not_done) or "nothing", advice))
        except NvmlError as exc:
            self.fail("NVML failed: {0}".format(exc))
        self._reset(sorted(set(node.reset_gpus) | set(applier.reset_gpus)))
        states = controller.read_back(p.gpu.index for p in node.plans if p.changed)
        self.result.update(changed=bool(applier.done), done=applier.done,
                           summary=self._summary(node.plans, states))
        # As carried out: a GPU whose MIG just came on was planned again from
        # NVML's profiles. "before" stays what the GPU was when read.
        self.result["plan"] = [dict(plan_to_dict(done), before=describe_gpu(found.gpu))
                               for done, found in zip(applier.plans, node.plans)]
        self._diff(node, lambda p: layout_lines(states.get(p.gpu.index, p.gpu),
                                                self._mode(states.get(p.gpu.index, p.gpu)),
                                                gpu_layout(states.get(p.gpu.index, p.gpu))))

    @staticmethod
    def _mode(gpu: t.Any) -> tuple[bool, bool]:
        return gpu.mig_enabled, gpu.mig_pending


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="dict"),
            config_file=dict(type="path"),
            label=dict(type="str", required=True),
            state=dict(type="str", choices=["applied", "asserted"], default="applied"),
            library=dict(type="path"),
        ),
        mutually_exclusive=[("config", "config_file")],
        required_one_of=[("config", "config_file")],
        supports_check_mode=True,
    )
    result = MigConfigManager(module).run()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
