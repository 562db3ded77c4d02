# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The verify role's checks, one layer at a time.

NVML facts come from nvml_info on the simulator; containerd's effective
configs are real `containerd config dump` outputs (fixtures/containerd);
`crictl info` / `docker info` / CRI-O documents follow the JSON/TOML keys of
those projects' sources.
"""

from __future__ import annotations

import copy
import json
import os
import stat
import subprocess
import typing as t
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_check, verify_dev_char_missing, verify_report, verify_stats
from ansible_collections.gpufleet.nvidia.plugins.lookup.knowledge import table as knowledge
from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge.packages import toolkit_packages
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _verify

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def declared(managed: bool = True, **values: t.Any) -> dict[str, t.Any]:
    return {"managed": managed, "reason": "test declaration", "vars": values}


def rules(check: dict[str, t.Any], severity: str = "error") -> list[str]:
    return [f["subject"] for f in check["findings"] if f["severity"] == severity]


@pytest.fixture(scope="module")
def mixed_nvml(tmp_path_factory: pytest.TempPathFactory, sim_library: Path) -> dict[str, t.Any]:
    from ansible_collections.gpufleet.nvidia.tests.unit.plugins import nvml_sim

    node = nvml_sim.SimNode(tmp_path_factory.mktemp("mixed"), "dgx-a100-mig-mixed")
    outcome = node.run("nvml_info")
    assert outcome["kind"] == "exit", outcome
    return outcome["result"]["nvml"]


# -- driver -------------------------------------------------------------------------


def test_driver_not_managed_is_never_a_pass(mixed_nvml: dict[str, t.Any]):
    check = _verify.check_driver(declared(False), mixed_nvml)
    assert check["status"] == "not_managed" and check["findings"] == []


def test_driver_pass(mixed_nvml: dict[str, t.Any]):
    check = _verify.check_driver(declared(driver_version=mixed_nvml["driver_version"]), mixed_nvml)
    assert check["status"] == "pass", check
    assert check["summary"] == "driver 550.127.05 loaded, 8 GPU(s)"


@pytest.mark.parametrize(
    "values,subject",
    [
        ({"driver_version": "535.261.03"}, "driver_version"),
        ({"driver_branch": "580"}, "driver_branch"),
    ],
)
def test_driver_differs_from_the_pin(mixed_nvml: dict[str, t.Any], values: dict[str, str], subject: str):
    check = _verify.check_driver(declared(**values), mixed_nvml)
    assert check["status"] == "fail"
    assert rules(check) == [subject]
    assert "550.127.05" in check["summary"]


def test_an_installed_kernel_without_the_drivers_module_fails_the_driver_layer(mixed_nvml: dict[str, t.Any]):
    """What a kernel update leaves when DKMS could not build for it (verify's kernel_modules read)."""
    listing = "6.1.0-57-amd64\t550.127.05\n6.12.95+deb12-amd64\t\n6.12.90+deb12-amd64\t535.261.03\n"
    check = _verify.check_driver(declared(), mixed_nvml, kernel_modules=listing)
    assert check["status"] == "fail"
    assert rules(check) == ["kernel 6.12.95+deb12-amd64", "kernel 6.12.90+deb12-amd64"]
    missing = check["findings"][0]
    assert missing["message"] == (
        "installed kernel 6.12.95+deb12-amd64 has no NVIDIA module, the driver is 550.127.05: a reboot into it leaves the GPUs without their driver"
    )
    assert "playbooks/kernel_roll.yml" in missing["fix"]
    assert "has the 535.261.03 NVIDIA module" in check["findings"][1]["message"]
    # Against the pin when there is one (a driver upgrade that waits for its reboot: every kernel has the new module).
    pinned = _verify.check_driver(declared(driver_version="535.261.03"), mixed_nvml, kernel_modules="6.12.90+deb12-amd64\t535.261.03\n")
    assert rules(pinned) == ["driver_version"]
    # Nothing read (a container, a bake): nothing judged.
    assert _verify.check_driver(declared(), mixed_nvml, kernel_modules="")["status"] == "pass"


@pytest.mark.parametrize(
    "status,words",
    [
        ("driver_not_loaded", "kernel module is not loaded"),
        ("version_mismatch", "differ"),
        ("library_not_found", "not installed"),
    ],
)
def test_driver_not_usable(status: str, words: str):
    nvml = {"status": status, "driver_loaded": status == "version_mismatch", "reason": "nvmlInit_v2: ..."}
    check = _verify.check_driver(declared(driver_branch="550"), nvml)
    assert check["status"] == "fail" and words in check["summary"]


def test_driver_absent_as_declared():
    assert _verify.check_driver(declared(driver_state="absent"), {"status": "library_not_found"})["status"] == "pass"
    check = _verify.check_driver(declared(driver_state="absent"), {"status": "ok", "driver_loaded": True, "driver_version": "550.127.05"})
    assert check["status"] == "fail"


def test_kernel_module_flavour_from_proc(mixed_nvml: dict[str, t.Any]):
    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.127.05  Release Build"
    assert _verify.check_driver(declared(driver_kernel_module="open"), mixed_nvml, proc)["status"] == "pass"
    check = _verify.check_driver(declared(driver_kernel_module="proprietary"), mixed_nvml, proc)
    assert check["status"] == "fail" and rules(check) == ["driver_kernel_module"]
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.127.05  Release Build"
    # auto on Ampere means open: the proprietary modules are a finding.
    assert _verify.check_driver(declared(driver_kernel_module="auto"), mixed_nvml, proprietary)["status"] == "fail"


# -- container toolkit ----------------------------------------------------------------


def test_container_toolkit_packages():
    packages = {name: [{"version": "1.17.8-1"}] for name in toolkit_packages("full")}
    assert _verify.check_container_toolkit(declared(container_toolkit_version="1.17.8"), packages)["status"] == "pass"
    check = _verify.check_container_toolkit(declared(container_toolkit_version="1.18.0"), packages)
    assert check["status"] == "fail" and len(rules(check)) == 4
    base = {"nvidia-container-toolkit-base": [{"version": "1.17.8-1"}]}
    assert _verify.check_container_toolkit(declared(container_toolkit_package_set="base"), base)["status"] == "pass"
    check = _verify.check_container_toolkit(declared(), base)
    # In install order, from the knowledge base's one package table.
    assert rules(check) == ["libnvidia-container1", "libnvidia-container-tools", "nvidia-container-toolkit"]


def test_a_repository_key_trusted_unpinned_is_a_warning_until_it_is_pinned(mixed_nvml: dict[str, t.Any]):
    base = {"nvidia-container-toolkit-base": [{"version": "1.20.1-1"}]}
    unpinned = declared(container_toolkit_package_set="base", container_toolkit_gpg_key_fingerprint="", container_toolkit_allow_unpinned_key=True)
    check = _verify.check_container_toolkit(unpinned, base)
    assert check["status"] == "warn" and rules(check, "warning") == ["repository key"]
    assert "container_toolkit_allow_unpinned_key is set" in check["findings"][0]["message"]
    # Allowed, but pinned after all: nothing to say.
    pinned = declared(container_toolkit_package_set="base", container_toolkit_gpg_key_fingerprint="C95B 321B", container_toolkit_allow_unpinned_key=True)
    assert _verify.check_container_toolkit(pinned, base)["status"] == "pass"
    driver = _verify.check_driver(declared(driver_allow_unpinned_key="yes"), mixed_nvml)
    assert rules(driver, "warning") == ["repository key"] and "driver_allow_unpinned_key is set" in driver["findings"][-1]["message"]
    assert rules(_verify.check_driver(declared(driver_allow_unpinned_key=False), mixed_nvml), "warning") == []


def toolkit_pass() -> tuple[dict[str, t.Any], dict[str, t.Any]]:
    return declared(container_toolkit_package_set="base"), {"nvidia-container-toolkit-base": [{"version": "1.20.1-1"}]}


def test_dev_char_links_of_the_facade_node():
    """A real listing: the links nvidia-ctk --create-all made, one deleted, one pointed at another GPU."""
    listing = (FIXTURES / "dev_char" / "facade-listing.txt").read_text()
    assert _verify.dev_char_missing(listing) == [
        {"link": "/dev/char/195:3", "target": "/dev/nvidia3", "found": ""},
        {"link": "/dev/char/195:4", "target": "/dev/nvidia4", "found": "/dev/nvidia5"},
    ]
    check = _verify.check_container_toolkit(*toolkit_pass(), {"listing": listing})
    assert check["status"] == "fail"
    assert rules(check) == ["/dev/char/195:3", "/dev/char/195:4"]
    assert "/dev/char/195:3, the link to /dev/nvidia3, is missing" in check["summary"]
    assert all("create-dev-char-symlinks --create-all" in f["fix"] and "container_toolkit_dev_char_links" in f["fix"] for f in check["findings"])
    # The dangling links --create-all makes for every possible MIG minor are no finding.
    lines = [line for line in listing.splitlines() if not line.startswith("link 195:4 ")]
    healed = "\n".join(lines + ["link 195:3 ../nvidia3", "link 195:4 /dev/nvidia4"]) + "\n"
    assert _verify.dev_char_missing(healed) == []
    assert _verify.check_container_toolkit(*toolkit_pass(), {"listing": healed})["status"] == "pass"


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_dev_char_listing_reads_real_device_nodes(tmp_path: Path):
    """The knowledge base's find, run on real character devices and links (its /dev moved to a temporary tree)."""
    dev = tmp_path / "dev"
    (dev / "nvidia-caps").mkdir(parents=True)
    (dev / "char").mkdir()
    for path, major, minor in (
        ("nvidia0", 195, 0),
        ("nvidiactl", 195, 255),
        ("nvidia-uvm", 510, 0),
        ("nvidia-caps/nvidia-cap1", 511, 1),
        ("nvidia-nvswitch0", 509, 0),
    ):
        os.mknod(dev / path, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
    (dev / "nvidia-not-a-device").write_text("")
    os.symlink(str(dev / "nvidia0"), dev / "char" / "195:0")
    os.symlink("../nvidia-uvm", dev / "char" / "510:0")
    devices = tmp_path / "devices"
    devices.write_text("Character devices:\n  1 mem\n195 nvidia-frontend\n509 nvidia-nvswitch\n510 nvidia-uvm\n511 nvidia-caps\n\nBlock devices:\n  8 sd\n")
    argv = [
        str(dev) + arg[4:] if arg.startswith("/dev") else str(devices) if arg == "/proc/devices" else arg
        for arg in knowledge("toolkit.DEV_CHAR_LISTING")["value"]
    ]
    listing = subprocess.run(argv, check=True, capture_output=True, text=True).stdout.replace(str(dev), "/dev")
    missing = _verify.dev_char_missing(listing)
    # A node of a major the nvidia modules did not register (a container's /dev/null standing in) is none.
    assert _verify.dev_char_missing(listing.replace("major 195 nvidia-frontend", "major 195 other")) == [
        item for item in missing if not item["link"].startswith("/dev/char/195:")
    ]
    # nvidia-nvswitch is left out as nvidia-ctk leaves it out; the relative link counts.
    assert [item["link"] for item in missing] == ["/dev/char/511:1", "/dev/char/195:255"]
    assert verify_dev_char_missing(listing) == missing


def test_dev_char_deferred_and_not_judged():
    check = _verify.check_container_toolkit(*toolkit_pass(), {"deferred": "image bake: no driver"})
    assert check["status"] == "pass" and rules(check, "info") == ["/dev/char"]
    assert _verify.check_container_toolkit(*toolkit_pass(), {})["findings"] == []
    with pytest.raises(AnsibleFilterError, match="dev_char"):
        verify_check({"packages": toolkit_pass()[1], "dev_char": "node c3:0 /dev/nvidia0"}, "container_toolkit", toolkit_pass()[0])
    with pytest.raises(AnsibleFilterError, match="verify_dev_char_missing"):
        verify_dev_char_missing(None)


# -- container runtime ----------------------------------------------------------------


def dump(name: str) -> str:
    return (FIXTURES / "containerd" / name).read_text()


def test_containerd_1_7_with_the_drop_in_passes():
    check = _verify.check_container_runtime(
        declared(container_runtime_engine="containerd", container_runtime_cdi=True), {"containerd_dump": dump("1.7.24-nvidia-dropin.toml")}
    )
    assert check["status"] == "pass", check
    assert check["observed"]["config"]["nvidia_binary"] == "/usr/bin/nvidia-container-runtime"


@pytest.mark.parametrize("fixture", ["1.7.24-no-import.toml", "1.6.20-no-import.toml"])
def test_removed_import_is_a_precise_failure(fixture: str):
    check = _verify.check_container_runtime(declared(container_runtime_engine="containerd"), {"containerd_dump": dump(fixture)})
    assert check["status"] == "fail"
    assert check["summary"] == ("containerd's effective config (`containerd config dump`) has no `nvidia` runtime; imports: /etc/containerd/config.toml")
    assert "imports" in check["findings"][0]["fix"]


def test_imports_order_does_not_change_the_report():
    """containerd prints `imports` in varying order (seen on 1.7.24): the check must not."""
    text = dump("1.7.24-nvidia-dropin.toml")
    swapped = text.replace(
        'imports = ["/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"]',
        'imports = ["/etc/containerd/conf.d/99-nvidia.toml", "/etc/containerd/config.toml"]',
    )
    assert swapped != text
    wanted = declared(container_runtime_cdi=True)
    assert _verify.check_container_runtime(wanted, {"containerd_dump": text}) == _verify.check_container_runtime(wanted, {"containerd_dump": swapped})


def test_containerd_1_6_has_no_cdi():
    observed = {"containerd_dump": dump("1.6.20-nvidia-dropin.toml")}
    check = _verify.check_container_runtime(declared(container_runtime_cdi=True), observed)
    assert check["status"] == "warn" and "no CDI support" in check["summary"]
    assert _verify.check_container_runtime(declared(container_runtime_cdi=False), observed)["status"] == "pass"


def test_default_runtime_declared_but_not_set():
    check = _verify.check_container_runtime(declared(container_runtime_set_default=True), {"containerd_dump": dump("1.7.24-nvidia-dropin.toml")})
    assert rules(check) == ["default_runtime"]


def crictl_info(runtimes: t.Iterable[str], cdi: bool) -> str:
    # Keys of containerd's CRI config as `crictl info` prints it (json tags in
    # containerd's CRI config: containerd.runtimes, enableCDI, cdiSpecDirs).
    return json.dumps(
        {
            "status": {"conditions": []},
            "config": {
                "containerd": {"defaultRuntimeName": "runc", "runtimes": {name: {"runtimeType": "io.containerd.runc.v2"} for name in runtimes}},
                "enableCDI": cdi,
                "cdiSpecDirs": ["/etc/cdi", "/var/run/cdi"],
            },
        }
    )


def test_running_containerd_not_restarted_after_the_change():
    observed = {"containerd_dump": dump("1.7.24-nvidia-dropin.toml"), "crictl_info": crictl_info(["runc"], False)}
    check = _verify.check_container_runtime(declared(container_runtime_cdi=True), observed)
    assert check["status"] == "fail"
    assert rules(check) == ["restart", "restart"]
    observed["crictl_info"] = crictl_info(["runc", "nvidia"], True)
    assert _verify.check_container_runtime(declared(container_runtime_cdi=True), observed)["status"] == "pass"


def test_docker_info():
    # Keys of Docker's /info (moby api types system.Info).
    info = {"ServerVersion": "28.3.0", "Runtimes": {"runc": {"path": "runc"}}, "DefaultRuntime": "runc", "CDISpecDirs": []}
    wanted = declared(container_runtime_engine="docker", container_runtime_cdi=True)
    check = _verify.check_container_runtime(wanted, {"docker_info": json.dumps(info)})
    assert rules(check) == ["runtime", "cdi"]
    info.update(Runtimes={"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}, CDISpecDirs=["/etc/cdi", "/var/run/cdi"])
    assert _verify.check_container_runtime(wanted, {"docker_info": json.dumps(info)})["status"] == "pass"


def test_crio_config():
    text = '[crio.runtime]\ndefault_runtime = "crun"\n[crio.runtime.runtimes.crun]\nruntime_path = ""\n'
    wanted = declared(container_runtime_engine="crio")
    assert rules(_verify.check_container_runtime(wanted, {"crio_config": text})) == ["runtime"]
    text += '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
    assert _verify.check_container_runtime(wanted, {"crio_config": text})["status"] == "pass"


def test_engine_not_installed():
    check = _verify.check_container_runtime(declared(), {"containerd_dump_error": "containerd: command not found"})
    assert check["status"] == "fail"
    assert "containerd: command not found" in check["summary"]


# -- CDI -----------------------------------------------------------------------------------


def ctk_spec(nvml: dict[str, t.Any], strategies: t.Sequence[str] = ("index", "uuid")) -> dict[str, t.Any]:
    """A spec named the way `nvidia-ctk cdi generate` names devices (pkg/nvcdi namer).

    A GPU in MIG mode gets no full-GPU device, only its MIG devices: what
    nvidia-ctk 1.20.1 generated for dgx-a100-mig-mixed on the workload
    scenario's driver facade (`nvidia-ctk cdi list`: 0:0..0:3, 1:0..1:6,
    2:0..2:2, 4..7)."""
    devices = []
    for gpu in nvml["gpus"]:
        for strategy in strategies if not gpu["mig"]["enabled"] else ():
            name = {"index": str(gpu["index"]), "type-index": "gpu{0}".format(gpu["index"]), "uuid": gpu["uuid"]}
            devices.append({"name": name[strategy], "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia{0}".format(gpu["index"])}]}})
        for j, mig in enumerate(gpu["mig"]["devices"]):
            for strategy in strategies:
                name = {"index": "{0}:{1}".format(gpu["index"], j), "type-index": "mig{0}:{1}".format(gpu["index"], j), "uuid": mig["uuid"]}
                devices.append({"name": name[strategy], "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia{0}".format(gpu["index"])}]}})
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}})
    return {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}]}}


def check_cdi(nvml: dict[str, t.Any], spec: dict[str, t.Any] | None, **values: t.Any) -> dict[str, t.Any]:
    text = None if spec is None else yaml.safe_dump(spec)
    return _verify.check_cdi(declared(**values), nvml, text, "/etc/cdi/nvidia.yaml")


@pytest.mark.parametrize("strategies", [("index", "uuid"), ("uuid",), ("type-index",)])
def test_cdi_spec_matches_nvml(mixed_nvml: dict[str, t.Any], strategies: tuple[str, ...]):
    value = list(strategies) if len(strategies) > 1 else strategies[0]
    check = check_cdi(mixed_nvml, ctk_spec(mixed_nvml, strategies), cdi_device_name_strategy=value)
    assert check["status"] == "pass", check


def test_json_spec_is_read_too(mixed_nvml: dict[str, t.Any]):
    check = _verify.check_cdi(declared(cdi_format="json"), mixed_nvml, json.dumps(ctk_spec(mixed_nvml)), "/etc/cdi/nvidia.json")
    assert check["status"] == "pass"


def test_stale_spec_after_a_mig_change(mixed_nvml: dict[str, t.Any]):
    """The spec was generated before GPU 1's MIG layout changed."""
    spec = ctk_spec(mixed_nvml)
    now = copy.deepcopy(mixed_nvml)
    gone = now["gpus"][1]["mig"]["devices"].pop()
    check = check_cdi(now, spec)
    assert check["status"] == "fail"
    messages = [f["message"] for f in check["findings"]]
    assert "CDI spec is stale: it lists {0}, which NVML does not report".format(gone["uuid"]) in messages
    assert "CDI spec is stale: GPU 1 has 6 MIG device(s), the spec names 7" in messages


def test_stale_spec_missing_a_gpu(mixed_nvml: dict[str, t.Any]):
    spec = ctk_spec(mixed_nvml)
    uuid = mixed_nvml["gpus"][4]["uuid"]
    spec["devices"] = [d for d in spec["devices"] if d["name"] not in ("4", uuid)]
    check = check_cdi(mixed_nvml, spec)
    assert "CDI spec is stale: GPU 4 ({0}) is missing from /etc/cdi/nvidia.yaml".format(uuid) in [f["message"] for f in check["findings"]]
    assert sorted(rules(check)) == sorted(["4", uuid])


def test_cdi_spec_absent_or_broken(mixed_nvml: dict[str, t.Any]):
    assert check_cdi(mixed_nvml, None)["summary"] == "no CDI spec at /etc/cdi/nvidia.yaml"
    check = _verify.check_cdi(declared(), mixed_nvml, "[not, a, mapping]", "/etc/cdi/nvidia.yaml")
    assert check["status"] == "fail" and "is not a CDI spec" in check["summary"]


def test_cdi_cannot_be_judged_without_nvml():
    check = check_cdi({"status": "driver_not_loaded"}, None)
    assert check["status"] == "not_available"
    assert [f["severity"] for f in check["findings"]] == ["warning"]


# -- crictl ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values,output,info_error,status",
    [
        ({"crictl_version": "v1.33.0", "crictl_kubernetes_version": "1.33"}, "crictl version v1.33.0", None, "pass"),
        ({"crictl_version": "", "crictl_kubernetes_version": "1.33"}, "crictl version v1.33.0", None, "pass"),
        ({"crictl_version": "v1.34.0"}, "crictl version v1.33.0", None, "fail"),
        ({"crictl_version": "", "crictl_kubernetes_version": "1.34"}, "crictl version v1.33.0", None, "fail"),
        ({"crictl_version": "v1.33.0"}, "crictl version v1.33.0", "connect: connection refused", "fail"),
        ({"crictl_version": "v1.33.0"}, None, None, "fail"),
    ],
)
def test_crictl(values: dict[str, str], output: str | None, info_error: str | None, status: str):
    assert _verify.check_crictl(declared(**values), output, info_error)["status"] == status


# -- MIG ---------------------------------------------------------------------------------------


def test_mig_without_the_module_is_not_available_never_a_pass():
    check = _verify.check_mig(declared(mig_label="all-1g.5gb"), available=False)
    assert check["status"] == "not_available"
    assert [f["severity"] for f in check["findings"]] == ["warning"]
    assert "gpufleet.nvidia.mig_config" in check["summary"]


def registered(differences: list[str] | None, plan: list[dict[str, t.Any]] | None = None, msg: str | None = None, **extra: t.Any) -> dict[str, t.Any]:
    """mig_config's result as the role registers it: `failed_when: false` leaves `failed: false`."""
    result = dict(extra, changed=False, failed=False, failed_when_result=False, plan=plan or [])
    if differences is not None:
        result["differences"] = differences
    if msg is not None:
        result["msg"] = msg
    return result


def gpu_plan(index: int, mode_change: str | None = None, changed: bool = True, reset_required: bool = False) -> dict[str, t.Any]:
    return {"index": index, "mode_change": mode_change, "changed": changed, "reset_required": reset_required}


def test_mig_assert_results():
    wanted = declared(mig_label="all-1g.5gb")
    assert _verify.check_mig(wanted, True, registered([]))["status"] == "pass"
    # A caller that keeps the module's own `failed` (no failed_when) is judged the same way.
    failed = {"failed": True, "msg": "GPU 3: expected 7 x 1g.5gb, found MIG disabled"}
    check = _verify.check_mig(wanted, True, failed)
    assert check["status"] == "fail" and "GPU 3: expected 7 x 1g.5gb, found MIG disabled" in check["summary"]
    assert _verify.check_mig(declared(False), False)["status"] == "not_managed"


def test_mig_switched_on_by_hand_is_a_finding_although_failed_is_false():
    """The verify scenario's tampering: MIG on by hand on GPU 0 of a node declared all-disabled."""
    line = "GPU 0: expected MIG disabled, found MIG enabled, no GPU instances"
    result = registered([line], [gpu_plan(0, "disable"), gpu_plan(1, changed=False)], msg="the MIG layout 'all-disabled' is not applied: " + line)
    check = _verify.check_mig(declared(mig_label="all-disabled"), True, result)
    assert check["status"] == "fail", check
    assert [(f["severity"], f["subject"], f["message"], f["fix"]) for f in check["findings"]] == [
        ("error", "GPU 0", "MIG layout 'all-disabled' is not applied: " + line, "disable MIG on GPU 0: run the mig layer (--tags mig)")
    ]
    assert check["observed"]["differences"] == [line]


def test_mig_findings_one_per_gpu_with_the_fix_for_each():
    lines = [
        "GPU 1: expected MIG enabled: 7 x 1g.5gb, found MIG disabled",
        "GPU 2: expected MIG enabled: 7 x 1g.5gb, found MIG enabled: 2 x 3g.20gb",
        "GPU 3: expected MIG enabled: 7 x 1g.5gb, found MIG disabled (enable pending until a GPU reset or reboot)",
    ]
    plan = [gpu_plan(0, changed=False), gpu_plan(1, "enable"), gpu_plan(2), gpu_plan(3, changed=False, reset_required=True)]
    result = registered(lines, plan, reset_required=True, reboot_required=True)
    check = _verify.check_mig(declared(mig_label="all-1g.5gb"), True, result)
    assert check["status"] == "fail"
    assert [(f["severity"], f["subject"], f["fix"]) for f in check["findings"]] == [
        ("error", "GPU 1", "enable MIG on GPU 1 and create the declared instances: run the mig layer (--tags mig)"),
        ("error", "GPU 2", "recreate the MIG instances of GPU 2: run the mig layer (--tags mig)"),
        ("warning", "GPU 3", "reset GPU 3 (nvidia-smi --gpu-reset -i 3) or reboot the node to finish the MIG mode change"),
    ]
    assert check["summary"] == "MIG layout 'all-1g.5gb' is not applied: " + lines[0]


def test_mig_only_waiting_for_a_reset_is_a_warning():
    line = "GPU 0: expected MIG disabled, found MIG enabled (disable pending until a GPU reset or reboot)"
    result = registered([line], [gpu_plan(0, changed=False, reset_required=True)], reset_required=True, reboot_required=True)
    check = _verify.check_mig(declared(mig_label="all-disabled"), True, result)
    assert check["status"] == "warn"
    assert check["summary"] == "MIG layout 'all-disabled' waits for a GPU reset or reboot: " + line


@pytest.mark.parametrize(
    "result", [None, {}, {"changed": False}, {"reboot_required": True}, registered(None, msg="NVML is not usable: the nvidia kernel module is not loaded")]
)
def test_mig_without_a_comparison_is_never_a_pass(result: dict[str, t.Any] | None):
    """The module stopped before comparing (or never ran): a layout is never passed unchecked."""
    check = _verify.check_mig(declared(mig_label="all-1g.5gb"), True, result)
    assert check["status"] == "fail", check
    [finding] = check["findings"]
    assert finding["message"].startswith("MIG layout 'all-1g.5gb' was not asserted: ")
    if result and result.get("msg"):
        assert finding["message"].endswith(result["msg"])


# -- filter, report ---------------------------------------------------------------------------


def test_deferred_in_a_bake():
    check = verify_check({"deferred": "image bake: no GPU"}, "driver", declared(driver_branch="580"))
    assert check["status"] == "deferred" and check["findings"][0]["severity"] == "info"


def test_filter_validates_its_input():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="^verify_check: the declaration"):
        verify_check({}, "driver", {"vars": {}})
    with pytest.raises(AnsibleFilterError, match="^verify_check: unknown layer"):
        verify_check({}, "gpu", declared())


def test_report_status_and_order(mixed_nvml: dict[str, t.Any]):
    checks = [
        _verify.check_mig(declared(mig_label="x"), False),
        _verify.check_driver(declared(driver_version="550.127.05"), mixed_nvml),
        _verify.not_managed("cdi", {"reason": "no cdi role"}),
    ]
    report = _verify.build_report("node", checks, mixed_nvml, {"driver": "550.127.05"})
    assert [c["layer"] for c in report["checks"]] == ["driver", "cdi", "mig"]
    assert report["status"] == "warn"  # not_available is never a pass
    assert report["summary"] == {"info": 0, "warning": 1, "error": 0}
    assert _verify.gate(report, "error") == [] and len(_verify.gate(report, "warning")) == 1
    lines = _verify.summary_lines(report)
    assert lines[0] == "node: WARN (0 error(s), 1 warning(s))"
    assert lines[1].split()[:2] == ["driver", "pass"]
    # Deterministic: the same inputs give the same report, byte for byte.
    again = _verify.build_report("node", list(reversed(checks)), mixed_nvml, {"driver": "550.127.05"})
    assert json.dumps(report, sort_keys=True) == json.dumps(again, sort_keys=True)


def test_the_report_carries_its_boot_and_time_and_keeps_the_time_of_an_unchanged_node(mixed_nvml: dict[str, t.Any]):
    """Issue 37 (fresh state): a reader (the Slurm guard) must tell a report of an earlier boot from this boot's.
    The time is kept where the node reads the same, so a second run writes the same bytes (0 changed)."""
    checks = [_verify.check_driver(declared(driver_version="550.127.05"), mixed_nvml)]
    first = verify_report(checks, "node", mixed_nvml, {"driver": "550.127.05"}, boot_id="boot-1\n", time="2026-01-02T03:04:05Z")
    assert (first["boot_id"], first["time"]) == ("boot-1", "2026-01-02T03:04:05Z")
    written = json.dumps(first, sort_keys=True)
    again = verify_report(checks, "node", mixed_nvml, {"driver": "550.127.05"}, boot_id="boot-1", time="2026-01-02T09:00:00Z", previous=written)
    assert json.dumps(again, sort_keys=True) == written
    # Another boot, or other readings: the new time.
    rebooted = verify_report(checks, "node", mixed_nvml, {"driver": "550.127.05"}, boot_id="boot-2", time="2026-01-02T09:00:00Z", previous=written)
    assert (rebooted["boot_id"], rebooted["time"]) == ("boot-2", "2026-01-02T09:00:00Z")
    changed = verify_report(checks, "node", mixed_nvml, {"driver": "550.144.03"}, boot_id="boot-1", time="2026-01-02T09:00:00Z", previous=written)
    assert changed["time"] == "2026-01-02T09:00:00Z"
    # The role's own keys (extra) are part of the report that must read the same, as the node holds it.
    schedulers = {"schedulers": {"labels": None, "slurm_gres": "gpu:2"}}
    held = json.dumps(verify_report(checks, "node", mixed_nvml, {}, boot_id="boot-1", time="2026-01-02T03:04:05Z", extra=schedulers))
    again = verify_report(checks, "node", mixed_nvml, {}, boot_id="boot-1", time="2026-01-02T09:00:00Z", previous=held, extra=schedulers)
    assert (again["time"], again["schedulers"]) == ("2026-01-02T03:04:05Z", schedulers["schedulers"])
    # A previous report that is missing or not JSON is none.
    for text in (None, "", "{not json", "[]"):
        assert verify_report(checks, "node", mixed_nvml, {}, boot_id="b", time="T", previous=text)["time"] == "T"
    with pytest.raises(AnsibleFilterError, match="^verify_report: boot_id must be a string"):
        verify_report(checks, "node", mixed_nvml, {}, boot_id=7)


def test_stats_for_awx_keep_every_layer_and_drop_info_findings(mixed_nvml: dict[str, t.Any]):
    checks = [_verify.check_mig(declared(mig_label="x"), False), _verify.check_driver(declared(driver_version="550.127.05"), mixed_nvml)]
    checks[1]["findings"].append({"severity": "info", "subject": "driver", "message": "m", "fix": "f"})
    report = _verify.build_report("node", checks, mixed_nvml, {"driver": "550.127.05"})
    stats = verify_stats(report)
    assert stats["checks"] == {"driver": "pass", "mig": "not_available"}
    assert stats["status"] == "warn" and stats["versions"] == {"driver": "550.127.05"}
    assert [f["severity"] for f in stats["findings"]] == ["warning"]
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="^verify_stats: expected"):
        verify_stats({"status": "pass"})


def test_mig_units_from_the_model_table_without_profiles(mixed_nvml: dict[str, t.Any]):
    gpus = _verify.report_gpus(mixed_nvml)
    assert [g["mig"]["units"] for g in gpus] == [8] * 8


def test_mig_label_without_a_configuration():
    check = _verify.check_mig(declared(mig_label="all-1g.5gb"), True, configured=False)
    assert check["status"] == "fail" and "neither mig_config nor mig_config_src" in check["summary"]


# -- the engine's version -------------------------------------------------------------------

# What each engine answers (containerd's cmd/containerd: App.Name, version.Package, version.Version,
# version.Revision; the test ground's tarball build sets no revision).
CONTAINERD_TARBALL = "containerd github.com/containerd/containerd/v2 v2.3.7 \n"
CONTAINERD_DEBIAN = "containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+b3\n"
CRIO_VERSION = "crio version 1.33.4\n"


def engine_reads(engine: str, rc: int = 0, stdout: str = "", stderr: str = "", info: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    command = {"containerd": ["containerd", "--version"], "crio": ["crio", "--version"]}.get(engine)
    reads: dict[str, t.Any] = {"command": command, "version": {"rc": rc, "stdout": stdout, "stderr": stderr} if command else None}
    if info is not None:
        reads["info"] = {"rc": 0, "stdout": json.dumps(info), "stderr": ""}
    return reads


@pytest.mark.parametrize(
    ("engine", "packages", "reads", "version", "source"),
    [
        # A tarball install: no package, the binary answers.
        (
            "containerd",
            {},
            engine_reads("containerd", stdout=CONTAINERD_TARBALL),
            "2.3.7",
            "`containerd --version`: containerd github.com/containerd/containerd/v2 v2.3.7",
        ),
        # The package wins where one owns the engine (what the matrix judged before).
        (
            "containerd",
            {"containerd": [{"version": "1.7.24~ds1-6+b3"}]},
            engine_reads("containerd", stdout=CONTAINERD_DEBIAN),
            "1.7.24",
            "package containerd 1.7.24~ds1-6+b3",
        ),
        ("containerd", {}, engine_reads("containerd", stdout=CONTAINERD_DEBIAN), "1.7.24", "`containerd --version`: " + CONTAINERD_DEBIAN.strip()),
        ("crio", {}, engine_reads("crio", stdout=CRIO_VERSION), "1.33.4", "`crio --version`: crio version 1.33.4"),
        ("crio", {}, engine_reads("crio", stdout="Version:        1.30.0\nGitCommit: abc\nGoVersion:      go1.22.5\n"), "1.30.0", None),
        ("docker", {}, engine_reads("docker", info={"ServerVersion": "28.3.0"}), "28.3.0", "`docker info` ServerVersion 28.3.0"),
    ],
)
def test_engine_version_is_read_from_the_package_or_the_engine(engine, packages, reads, version, source):
    from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_engine_version

    found = verify_engine_version(reads, engine, packages)
    assert (found["version"], found["not_checked"]) == (version, None), found
    if source is not None:
        assert found["source"] == source


@pytest.mark.parametrize(
    ("reads", "why"),
    [
        (engine_reads("containerd", rc=127), "`containerd --version`: containerd is not on PATH"),
        (engine_reads("containerd", rc=1, stderr="permission denied"), "`containerd --version` failed (rc 1): permission denied"),
        (engine_reads("containerd", stdout="containerd github.com/containerd/containerd/v2\n"), "`containerd --version` gave no version"),
        ({"command": ["containerd", "--version"], "version": None}, "`containerd --version` was not run"),
    ],
)
def test_an_engine_version_not_read_says_why(reads, why):
    from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_engine_version

    found = verify_engine_version(reads, "containerd", {})
    assert found["version"] is None
    assert found["not_checked"].startswith("no package owns containerd (containerd or containerd.io); ") and why in found["not_checked"], found


def test_engine_version_filter_names_bad_input():
    from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_engine_version

    with pytest.raises(AnsibleFilterError, match="^verify_engine_version: expected the engine's reads as a mapping"):
        verify_engine_version("containerd 2.3.7", "containerd")
    with pytest.raises(AnsibleFilterError, match="^verify_engine_version: engine must name"):
        verify_engine_version({}, "")


def test_the_report_says_not_checked_never_a_guess(mixed_nvml: dict[str, t.Any]):
    """A version that was not read is "not checked" with why, in the report, the HTML, the Markdown and the text;
    with NVML down the driver, CUDA and GPU fields are not checked either (not "none")."""
    from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_report
    from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _report

    why = "containerd: no package owns containerd (containerd or containerd.io); `containerd --version`: containerd is not on PATH"
    checks = [_verify.check_driver(declared(driver_version="550.127.05"), mixed_nvml)]
    report = verify_report(checks, "node-a", mixed_nvml, {"driver": "550.127.05", "cuda": "12.4", "engine": None}, {"engine": why, "crictl": None})
    assert report["not_checked"] == {"engine": why}
    down = verify_report([], "node-b", {"status": "driver_not_loaded"}, {"driver": None, "cuda": None})
    assert down["not_checked"] == {"cuda": "NVML status driver_not_loaded", "driver": "NVML status driver_not_loaded", "gpus": "NVML status driver_not_loaded"}
    # Everything read: no key at all (an unchanged node's report stays as it was).
    assert "not_checked" not in verify_report(checks, "node-c", mixed_nvml, {"driver": "550.127.05", "engine": "containerd 2.3.7"})

    html = _report.render_html([report, down])
    assert "?" not in html.split("<h2>Hosts and versions</h2>", 1)[1].split("</table>", 1)[0]
    assert '<td class="nc">not checked<span class="why">{0}</span></td>'.format(_report._e(why)) in html
    assert '<td class="nc">not checked<span class="why">NVML status driver_not_loaded</span></td>' in html
    markdown = _report.render_markdown([report, down])
    assert "| not checked ({0}) |".format(why.replace("|", "\\|")) in markdown
    row_b = next(line for line in markdown.splitlines() if line.startswith("| node-b |"))
    assert row_b.count("not checked (NVML status driver_not_loaded)") == 3 and "| none |" not in row_b
    text = _report.render_text([report, down])
    assert any(line.startswith("node-b: ") and "driver not checked (NVML status driver_not_loaded)" in line for line in text), text
    assert verify_stats(report)["not_checked"] == {"engine": why} and "not_checked" not in verify_stats(verify_report(checks, "node-c", mixed_nvml, {}))
    with pytest.raises(AnsibleFilterError, match="^verify_report: not_checked must map"):
        verify_report(checks, "node-a", mixed_nvml, {}, ["engine"])
