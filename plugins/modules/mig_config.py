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
  - The config is validated like mig-parted validates it (unknown keys are rejected, a C(mig-devices) whose counts
    are all 0 is refused, C(devices=[]) selects no GPU), then against the profiles and placements each GPU really
    offers, as NVML reports them, also while MIG is off where the driver answers then (driver 580 on an H100 did).
    Only where the driver describes no profile with MIG off does the module plan from a built-in table of known MIG
    GPUs (A30, A100, H100, H20, H200, GH200, B200, GB200, RTX PRO 6000), and plans again from NVML's answer once MIG
    is on.
  - Device indices that the node does not have are skipped with a warning, as mig-parted skips them; with
    O(state=asserted) they count as a difference (a GPU that fell off the bus looks the same).
  - The plan is the smallest change. GPU instances that already fit the layout are kept, the others destroyed, and
    the missing ones created with an explicit placement, each with its default compute instance (or the compute
    instances a C(<c>c.<profile>) entry asks for). A layout that cannot fit fails before anything is changed, with
    the reason (too many instances of a profile, not enough compute or memory slices, placements that overlap, a
    profile the GPU lacks).
  - Processes still attached to a GPU that must change make the module fail before anything is changed, naming
    them. Stop the GPU's clients first (the C(gpufleet.nvidia.mig) role does).
  - A MIG mode change that needs a GPU reset or a reboot (NVML's C(RESET_REQUIRED); typical of Ampere GPUs in VMs) is
    requested and reported in RV(reset_required) and RV(reset_gpus); the instances of those GPUs are created by the
    next run after the reset. With O(reset=true) the module resets them itself, all in one C(nvidia-smi --gpu-reset)
    call, and finishes every layout in the same run. A process on any GPU to be reset fails the run before anything
    is changed; a reset that still fails part-way gets the layout finished on every GPU that did reset and leaves the
    others in their old mode, never MIG on without its instances.
  - When an NVML call fails part-way, the module fails with the failed step, what it had already done (RV(done))
    and what it had not (RV(not_done)). Nothing is rolled back except a MIG mode it had just switched on; a second run
    plans from what is on the GPUs and converges.
extends_documentation_fragment:
  - gpufleet.nvidia.attributes
  - gpufleet.nvidia.attributes.mutating
  - gpufleet.nvidia.attributes.action_group_nvml
options:
  config:
    description:
      - The mig-parted config, inline (C(version) and C(mig-configs)).
      - Exactly one of O(config) and O(config_file) is required unless O(state=exported).
    type: dict
  config_file:
    description:
      - A mig-parted config file on the managed node, JSON or YAML (YAML needs PyYAML on the node).
      - Exactly one of O(config) and O(config_file) is required unless O(state=exported).
    type: path
  label:
    description:
      - The entry of C(mig-configs) to apply or assert, for example C(all-1g.5gb) or C(all-balanced).
      - Required unless O(state=exported), where it names the exported label (default C(current)).
    type: str
  state:
    description:
      - V(applied) changes the GPUs until they match the label.
      - V(asserted) changes nothing and fails when a GPU differs, with one line per GPU
        (for example C(GPU 3 - expected MIG enabled, 7 x 1g.5gb, found MIG disabled)).
      - V(exported) changes nothing and returns the node's current layout as a mig-parted config in RV(exported),
        under O(label) (default C(current)); applying it reports no change. O(config) and O(config_file) are not
        used.
    type: str
    choices: [applied, asserted, exported]
    default: applied
  reset:
    description:
      - Reset the GPUs whose new MIG mode waits for a reset (all in one O(nvidia_smi) C(--gpu-reset) call) and finish
        their layout in the same run. A GPU that only waits for its reset then counts as a change, in check mode too.
      - V(false) only requests the mode and reports the GPUs in RV(reset_gpus).
    type: bool
    default: false
  mode_only:
    description:
      - With O(state=asserted), compare only the MIG mode (current and pending) of each selected GPU, not its
        instances, as C(nvidia-mig-parted assert --mode-only) does. Useful right after a mode change, before the
        instances are made.
    type: bool
    default: false
  hooks:
    description:
      - User hooks in nvidia-mig-parted's hooks file format (C(version=v1), C(hooks) mapping C(apply-start),
        C(pre-apply-mode), C(pre-apply-config) and C(apply-exit) to lists of C(command), C(args), C(envs),
        C(workdir)), inline. Run with O(state=applied) only, and not in check mode.
      - C(apply-start) runs first; C(pre-apply-mode) when a MIG mode changes (or a waiting GPU is reset);
        C(pre-apply-config) when GPU instances change; C(apply-exit) last, also after a failure. The GPUs are read
        again after the hooks before a change, so a hook may stop the GPU's clients. A hook that fails stops the
        run. Each hook gets the C(MIG_PARTED_*) variables mig-parted gives its hooks.
    type: dict
  hooks_file:
    description: Like O(hooks), from a file on the managed node (JSON, or YAML with PyYAML).
    type: path
  stop_services:
    description:
      - GPU client services (kubelet, nvidia-dcgm, ...) to stop around a change, in this order, and start again in the
        reverse order when it is over, failed or not. Only those that run are stopped, and only when the layout
        changes.
      - Before stopping anything the module writes them to O(stopped_path) (fsync'd), and removes that once they run
        again. A run killed in between (a cancelled job, a dropped connection) leaves the file, and the next run's
        first node call (M(gpufleet.nvidia.node_fingerprint)) starts them.
    type: list
    elements: str
    default: []
  stop_containers:
    description: CRI container ids to stop after O(stop_services) (with O(crictl)); their pods' kubelet starts them
      again.
    type: list
    elements: str
    default: []
  crictl:
    description: The crictl that stops O(stop_containers).
    type: str
    default: crictl
  stopped_path:
    description: The journal of stopped services.
    type: path
    default: /var/lib/gpufleet/stopped-services.json
  lock_path:
    description:
      - The node lock, held for the whole change. The boot unit C(gpufleet-mig) holds it while it applies the
        layout after a reboot, so a run waits for it rather than partitioning the GPUs at the same time.
    type: path
    default: /run/lock/gpufleet.lock
  lock_timeout:
    description: Seconds to wait for the node lock before failing.
    type: int
    default: 600
  nvidia_smi:
    description: The nvidia-smi that O(reset=true) runs.
    type: str
    default: nvidia-smi
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

- name: Apply it, resetting the GPUs whose new MIG mode waits for a reset (all at once), then finish them
  gpufleet.nvidia.mig_config:
    config_file: /etc/nvidia-mig-manager/config.yaml
    label: all-balanced
    reset: true
  become: true

- name: Read the node's layout as a mig-parted config
  gpufleet.nvidia.mig_config:
    state: exported
    label: this-node
  become: true
  register: layout

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
        - Where the GPU-instance profiles used for the plan came from. V(nvml) when MIG was on or the driver
          described them with MIG off; otherwise V(catalogue) (the built-in table) or V(none) (an unknown GPU;
          planned once MIG is on).
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
hooks_ran:
  description: The user hooks run, in order, as C(hooks.hooks.<name>[<n>]).
  returned: when O(hooks) or O(hooks_file) is given and the apply ran
  type: list
  elements: str
  sample: ["hooks.hooks.apply-start[0]", "hooks.hooks.apply-exit[0]"]
missing_devices:
  description: One line per config entry that names GPU indices this node does not have (also given as warnings).
  returned: when O(state=applied) or O(state=asserted) and the GPUs could be read
  type: list
  elements: str
  sample: ["mig-configs.all[0] selects GPU 9, which this node does not have (it has GPU 0-7)"]
reset:
  description: The GPU reset made with O(reset=true) (V(gpus) reset in one call, and what nvidia-smi said).
  returned: when a reset was run
  type: dict
  sample: {gpus: [0, 1], output: "exit 0: GPU 00000000:07:00.0 was successfully reset. ..."}
exported:
  description: With O(state=exported), the node's current layout as a mig-parted C(version=v1) config.
  returned: when O(state=exported)
  type: dict
  sample: {version: v1, mig-configs: {current: [{devices: all, mig-enabled: true, mig-devices: {1g.5gb: 7}}]}}
left_out:
  description: With O(state=exported), the GPUs a mig-parted config cannot describe so that it re-applies unchanged,
    and why (also given as warnings).
  returned: when O(state=exported)
  type: list
  elements: str
  sample: []
differences:
  description: With O(state=asserted), one line per GPU that does not match the label.
  returned: when O(state=asserted)
  type: list
  elements: str
  sample: ["GPU 3: expected MIG enabled: 7 x 1g.5gb, found MIG disabled"]
"""

import time
import typing as t

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.apply import MigApplyError, NodePlan
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.config import MigConfigError, load_config_file, parse_config, select_label
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.describe import describe_gpu, gpu_layout, layout_lines
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.export import export_config, plan_to_dict
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.hooks import HookRunner, MigHookError, hook_env, parse_hooks
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.run import MigClientsError, MigResetError, MigRun, RunResult
from ansible_collections.gpufleet.nvidia.plugins.module_utils._mig.state import MigPlanError
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml.constants import DEFAULT_LIBRARY, NvmlError, NvmlLibraryNotFoundError
from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml.session import NvmlSession
from ansible_collections.gpufleet.nvidia.plugins.module_utils._run_lease import LeaseBusy, NodeLock, StoppedServices


class MigConfigManager:
    """Desired (a config label) vs actual (the GPUs through NVML), and the change between them."""

    def __init__(self, module: AnsibleModule) -> None:
        self.module = module
        self.params = module.params
        self.result: dict[str, t.Any] = {
            "changed": False,
            "label": self.params["label"],
            "reset_required": False,
            "reboot_required": False,
            "reset_gpus": [],
        }
        # The journal of the clients this call stopped, until they run again.
        self.clients: StoppedServices | None = None

    def fail(self, msg: str, **extra: t.Any) -> t.NoReturn:
        self.result.update(extra)
        self._start_clients()
        self.module.fail_json(msg=msg, **self.result)

    # -- the GPU's clients, stopped and started in the same call as the change --------------------------
    def _stop_clients(self) -> None:
        """Journal, then stop, the client services that run; then the client containers."""
        systemctl = self.module.get_bin_path("systemctl") or "systemctl"
        self.clients = StoppedServices(self.module.run_command, systemctl, self.params["stopped_path"])
        try:
            self.result["stopped_services"] = self.clients.stop(self.params["stop_services"], "MIG layout {0}".format(self.params["label"]))
        except (OSError, RuntimeError) as exc:
            self.fail("stopping the GPU clients failed, so nothing was changed: {0}".format(exc))
        if self.params["stop_containers"]:
            rc, _out, err = self.module.run_command([self.params["crictl"], "stop"] + list(self.params["stop_containers"]))
            if rc != 0:
                self.fail("crictl stop of the GPU client containers failed, so nothing was changed: {0}".format(err.strip()))
            self.result["stopped_containers"] = list(self.params["stop_containers"])

    def _start_clients(self) -> None:
        clients, self.clients = self.clients, None
        if clients is None:
            return
        started, failed = clients.start_all()
        self.result["started_services"] = started
        if failed:
            # The journal stays: the next run's first node call tries again.
            self.module.warn("GPU client services did not start again: " + "; ".join(failed))

    def entries(self) -> t.Any:
        data = self.params["config"]
        if data is None:
            data = load_config_file(self.params["config_file"])
        return select_label(parse_config(data), self.params["label"])

    def run(self) -> dict[str, t.Any]:
        if self.params["state"] != "exported":
            if self.params["config"] is None and self.params["config_file"] is None:
                self.fail("state={0} needs the config: set config (inline) or config_file (a file on the node)".format(self.params["state"]))
            try:
                entries = self.entries()
            except MigConfigError as exc:
                self.fail("invalid MIG config: {0}".format(exc))
        library = self.params["library"] or DEFAULT_LIBRARY
        try:
            NvmlSession(library)
        except NvmlLibraryNotFoundError as exc:
            self.fail(
                "NVML cannot be loaded from {0}: {1}; {2}. On an image being built without a GPU, install "
                "the boot unit instead (gpufleet.nvidia.mig with mig_bake: true)".format(library, exc.text, exc.hint)
            )

        def open_session() -> NvmlSession:
            session = NvmlSession(library)
            try:
                session.init()
            except NvmlError as exc:
                self.fail("NVML is not usable: {0}".format(exc))
            return session

        if self.params["state"] == "exported":
            self._export(open_session)
        else:
            self._run(MigRun(entries, self.params["label"], open_session))
        return self.result

    def _export(self, open_session: t.Callable[[], NvmlSession]) -> None:
        try:
            config, problems = export_config(open_session, self.params["label"] or "current")
        except NvmlError as exc:
            self.fail("reading the GPUs failed: {0}".format(exc))
        for line in problems:
            self.module.warn(line)
        self.result.update(exported=config, left_out=problems, label=self.params["label"] or "current")

    def _run(self, run: MigRun) -> None:
        hooks = self._hooks() if self.params["state"] == "applied" else None  # refused before NVML is read
        try:
            node = run.plan()
        except MigPlanError as exc:
            self.fail("the MIG layout {0!r} cannot be applied: {1}".format(self.params["label"], exc))
        except NvmlError as exc:
            self.fail("reading the GPUs failed: {0}".format(exc))
        self.result["missing_devices"] = node.missing
        for line in node.missing:
            self.module.warn(
                "{0}; mig-parted skips such indices, so does this module{1}".format(line, "" if self.params["state"] == "applied" else ", but the assert fails")
            )
        self.result["plan"] = [self._plan_dict(p) for p in node.plans]
        self._reset(node.reset_gpus)
        if self.params["state"] == "asserted":
            self._assert(node)
        elif self.module.check_mode:
            self._predict(node)
        else:
            self._apply(run, node, hooks)

    def _plan_dict(self, plan: t.Any) -> dict[str, t.Any]:
        found = plan_to_dict(plan)
        if self.params["reset"] and plan.awaiting_reset:
            # The apply resets it and finishes it: a change check mode must predict too.
            found["steps"] = plan.steps(RESET_STEP)
            found["changed"] = True
        return found

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
            before = [line for p in node.plans for line in layout_lines(p.gpu, (p.gpu.mig_enabled, p.gpu.mig_pending), gpu_layout(p.gpu))]
            self.result["diff"] = {"before": "\n".join(before) + "\n", "after": "\n".join(line for p in node.plans for line in after(p)) + "\n"}

    def _assert(self, node: NodePlan) -> None:
        differences = node.mode_differences() if self.params["mode_only"] else node.differences()
        self.result["differences"] = differences
        self.result["summary"] = self._summary(node.plans)
        if differences:
            self.fail("the MIG layout {0!r} is not applied: {1}".format(self.params["label"], "; ".join(differences)))

    def _predict(self, node: NodePlan) -> None:
        resetting = self.params["reset"]
        clients = node.clients_in_the_way(resetting)
        if clients:
            self.module.warn("client processes would block the change (stop them before applying): " + "; ".join(clients))
        self.result["changed"] = node.changes(resetting)
        self.result["summary"] = [
            "{0}: {1}".format(
                p.gpu.label, "{0} (planned)".format(plan_to_dict(p)["after"]) if p.changed or (resetting and p.awaiting_reset) else describe_gpu(p.gpu)
            )
            for p in node.plans
        ]
        self._diff(
            node, lambda p: layout_lines(p.gpu, (True, True) if resetting and p.awaiting_reset and p.gpu.mig_pending else p.mig_after(), p.layout_after())
        )

    def _gpu_reset(self, gpus: t.Sequence[int]) -> tuple[bool, str]:
        """Every waiting GPU in one call (mig-parted's order): none is reset while another still waits."""
        rc, out, err = self.module.run_command([self.params["nvidia_smi"], "--gpu-reset", "-i", ",".join(str(i) for i in gpus)])
        return rc == 0, "exit {0}: {1}".format(rc, " ".join((out + err).split()))

    def _hooks(self) -> HookRunner | None:
        source = self.params["hooks_file"] or "hooks"
        try:
            data = load_config_file(source) if self.params["hooks_file"] else self.params["hooks"]
            hooks = parse_hooks(data)
        except MigConfigError as exc:
            self.fail("invalid hooks ({0}): {1}".format(source, exc))
        if not hooks:
            return None
        return HookRunner(hooks, hook_env(self.params["config_file"] or "", self.params["label"], self.params["hooks_file"] or "", self.params["reset"]))

    def _apply(self, run: MigRun, node: NodePlan, hooks: HookRunner | None) -> None:
        if not node.changes(self.params["reset"]) and hooks is None:
            self.result["done"] = []
            self.result["summary"] = self._summary(node.plans)
            return
        lock = NodeLock(self.params["lock_path"])
        try:
            lock.acquire(time.monotonic() + self.params["lock_timeout"])
        except LeaseBusy:
            self.fail(
                "the node lock {0} stayed taken for {1} s: the boot unit gpufleet-mig (or another node step) is still "
                "partitioning the GPUs; nothing was changed".format(self.params["lock_path"], self.params["lock_timeout"])
            )
        try:
            self._stop_clients()
            result = self._apply_locked(run, node, hooks)
            self._start_clients()
        finally:
            lock.release()
        if hooks is not None:
            self.result["hooks_ran"] = hooks.ran
        self._report(node, result)

    def _apply_locked(self, run: MigRun, node: NodePlan, hooks: HookRunner | None) -> RunResult:
        """The change itself; each failure fails the task (self.fail starts the clients again first)."""
        try:
            return run.apply(self._gpu_reset if self.params["reset"] else None, hooks)
        except MigClientsError as exc:
            if exc.before_reset:
                self.fail("{0}. Stop it and run again (the pending mode needs only the reset)".format(exc))
            self.fail(
                "GPU clients are still attached, so nothing was changed. Stop them (for services, list them in "
                "mig_gpu_clients) and run again: " + "; ".join(exc.clients)
            )
        except MigResetError as exc:
            self._report(node, exc.result)
            self.fail("{0}. Stop what holds those GPUs and run again, or reboot (the boot unit applies the layout)".format(exc))
        except MigApplyError as exc:
            self.result.update(changed=bool(exc.done), done=exc.done, not_done=exc.not_done)
            advice = (
                "Run again to converge: the next run plans from what is on the GPUs now."
                if exc.converges
                else "Running again will not help: once MIG was on, the driver reported other MIG profiles than "
                "the plan used (gpufleet's table of known GPUs, where the driver describes none with MIG off), "
                "and the layout does not fit them; change the config."
            )
            self.fail(
                "{0}. Done before the failure: {1}. Not done: {2}. {3}".format(
                    exc, "; ".join(exc.done) or "nothing", "; ".join(exc.not_done) or "nothing", advice
                )
            )
        except MigPlanError as exc:
            self.fail("the MIG layout {0!r} cannot be applied: {1}".format(self.params["label"], exc))
        except MigHookError as exc:
            self.fail("a user hook failed: {0}".format(exc), hooks_ran=hooks.ran if hooks else [])
        except NvmlError as exc:
            self.fail("NVML failed: {0}".format(exc))

    def _report(self, node: NodePlan, result: RunResult) -> None:
        self._reset(result.waiting)
        states = result.states
        self.result.update(changed=bool(result.done or result.reset), done=result.done, summary=self._summary(node.plans, states))
        if result.reset:
            self.result["reset"] = {"gpus": result.reset, "output": result.reset_output}
        # As carried out: a GPU whose MIG just came on was planned again from
        # NVML's profiles. "before" stays what the GPU was when read.
        self.result["plan"] = [dict(plan_to_dict(done), before=describe_gpu(found.gpu)) for done, found in zip(result.plans, node.plans)]
        self._diff(
            node, lambda p: layout_lines(states.get(p.gpu.index, p.gpu), self._mode(states.get(p.gpu.index, p.gpu)), gpu_layout(states.get(p.gpu.index, p.gpu)))
        )

    @staticmethod
    def _mode(gpu: t.Any) -> tuple[bool, bool]:
        return gpu.mig_enabled, gpu.mig_pending


RESET_STEP = "reset the GPU so its new MIG mode takes effect (one nvidia-smi --gpu-reset for all waiting GPUs)"


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            config=dict(type="dict"),
            config_file=dict(type="path"),
            label=dict(type="str"),
            state=dict(type="str", choices=["applied", "asserted", "exported"], default="applied"),
            reset=dict(type="bool", default=False),
            mode_only=dict(type="bool", default=False),
            hooks=dict(type="dict"),
            hooks_file=dict(type="path"),
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            library=dict(type="path"),
            stop_services=dict(type="list", elements="str", default=[]),
            stop_containers=dict(type="list", elements="str", default=[]),
            crictl=dict(type="str", default="crictl"),
            stopped_path=dict(type="path", default="/var/lib/gpufleet/stopped-services.json"),
            lock_path=dict(type="path", default="/run/lock/gpufleet.lock"),
            lock_timeout=dict(type="int", default=600),
        ),
        mutually_exclusive=[("config", "config_file"), ("hooks", "hooks_file")],
        required_if=[("state", "applied", ("label",)), ("state", "asserted", ("label",))],
        supports_check_mode=True,
    )
    result = MigConfigManager(module).run()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
