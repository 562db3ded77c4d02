#!/usr/bin/env python3
"""Make a privileged simulated node look as if the NVIDIA driver were loaded.

Run on the node (root, CAP_SYS_ADMIN and CAP_MKNOD: `podman run --privileged`)
by extensions/molecule/_shared/sim-driver.yml; see that play's header for
what is faked and why. Everything is derived from `nvml-simctl show`, so the
device nodes, /proc and /sys agree with what the simulated NVML reports.
Re-running it after the simulated state changed (MIG instances created or
destroyed) brings the facade up to date: the files are rewritten in place
under the bind mounts, and device nodes that no longer exist are removed.

Prints one JSON object: what changed ({"changed": bool, "nodes": [...]}).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import typing as t

STAGE = "/run/gpufleet-sim-driver"
GPU_MAJOR = 195  # fixed by the driver (register_chrdev(195, "nvidia"))
CTL_MINOR = 255  # /dev/nvidiactl
# The driver's mig-minors layout: config 1, monitor 2, then per GPU 15 GPU
# instances, each with its access minor followed by 8 compute instances.
MIG_GIS, MIG_CIS = 15, 8
NVIDIA_VENDOR = "0x10de"
CLASS_3D = "0x030200"  # 3D controller, as datacenter GPUs report
# NVSwitches enumerate as "bridge, other" (what driver_info's nvswitches looks
# for: plugins/module_utils/_driver_state.py); device 0x22a3 is the Hopper
# NVSwitch in pci.ids ("GH100 [H100 NVSwitch]"). The system record's
# `nvswitches=N` (FORMAT.md) places them on buses 0x05.. (free on every fixture).
CLASS_BRIDGE_OTHER = "0x068000"
NVSWITCH_DEVICE = "0x22a3"
NVSWITCH_FIRST_BUS = 0x05
# The simulated driver's kernel log: simctl inject xid appends to it, and it is
# bind-mounted over /dev/kmsg so readers of the kernel log see exactly it.
KMSG = "/run/nvml-sim/kmsg"


def gi_minor(gpu: int, gi: int) -> int:
    return 3 + gpu * MIG_GIS * (MIG_CIS + 1) + gi * (MIG_CIS + 1)


def ci_minor(gpu: int, gi: int, ci: int) -> int:
    return gi_minor(gpu, gi) + 1 + ci


def write(path: str, text: str, changed: list[str]) -> None:
    """Rewrite in place (same inode: a file bind-mounted elsewhere follows)."""
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    changed.append(path)


def mknod(path: str, major: int, minor: int, changed: list[str]) -> None:
    try:
        st = os.lstat(path)
        if stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == major and os.minor(st.st_rdev) == minor:
            return
        os.unlink(path)
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    os.chmod(path, 0o666)
    changed.append(path)


def is_mountpoint(path: str) -> bool:
    return subprocess.run(["mountpoint", "-q", path], check=False).returncode == 0


def bind(source: str, target: str, changed: list[str]) -> None:
    if not is_mountpoint(target):
        subprocess.run(["mount", "--bind", source, target], check=True)
        changed.append(target)


def proc_devices(original: str, names: dict[int, str]) -> str:
    """The node's own /proc/devices with the driver's majors among the character devices."""
    chars, rest, section = [], [], None
    for line in original.splitlines():
        if line.startswith("Character devices:"):
            section = chars
            continue
        if line.startswith("Block devices:"):
            section = rest
        if section is chars and line.strip():
            major, _sep, name = line.strip().partition(" ")
            if not name.startswith("nvidia"):
                chars.append((int(major), name))
        elif section is rest:
            rest.append(line)
    chars.extend((major, name) for major, name in names.items())
    body = "".join("{0:3d} {1}\n".format(major, name) for major, name in sorted(chars))
    return "Character devices:\n" + body + "\n" + "\n".join(rest).strip("\n") + "\n"


def gpu_information(gpu: dict[str, t.Any]) -> str:
    return (
        "Model: \t\t {name}\nIRQ:   \t\t 0\nGPU UUID: \t {uuid}\nVideo BIOS: \t ??.??.??.??.??\n"
        "Bus Type: \t PCIe\nDMA Size: \t 47 bits\nDMA Mask: \t 0x7fffffffffff\n"
        "Bus Location: \t {bus}\nDevice Minor: \t {minor}\nGPU Excluded:\t No\n"
    ).format(name=gpu["name"], uuid=gpu["uuid"], bus=gpu["bus_id"].lower()[4:], minor=gpu["minor"])


def access(minor: int) -> str:
    return "DeviceFileMinor: {0}\nDeviceFileMode: 292\nDeviceFileModify: 1\n".format(minor)


def build(state: dict[str, t.Any], uvm_major: int, caps_major: int) -> dict[str, t.Any]:
    changed: list[str] = []
    system = state["system"]
    gpus = state["gpus"]
    version = system["driver_version"]
    # 550 renamed the GPU major from nvidia-frontend to nvidia (nvidia-ctk reads either).
    gpu_major_name = "nvidia" if int(version.split(".")[0]) >= 550 else "nvidia-frontend"

    with open("/proc/devices", encoding="utf-8") as handle:
        original = handle.read()
    if not is_mountpoint("/proc/devices"):
        write(STAGE + "/proc-devices.orig", original, [])
    else:
        with open(STAGE + "/proc-devices.orig", encoding="utf-8") as handle:
            original = handle.read()
    write(STAGE + "/proc-devices", proc_devices(original, {GPU_MAJOR: gpu_major_name, uvm_major: "nvidia-uvm", caps_major: "nvidia-caps"}), changed)

    driver = STAGE + "/proc-driver"
    write(
        driver + "/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {0}  (gpufleet simulated driver)\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n".format(
            version
        ),
        changed,
    )
    minors = ["config 1", "monitor 2"]
    wanted_nodes = {
        "/dev/nvidiactl": (GPU_MAJOR, CTL_MINOR),
        "/dev/nvidia-uvm": (uvm_major, 0),
        "/dev/nvidia-uvm-tools": (uvm_major, 1),
        "/dev/nvidia-caps/nvidia-cap1": (caps_major, 1),
        "/dev/nvidia-caps/nvidia-cap2": (caps_major, 2),
    }
    write(driver + "/nvidia/capabilities/mig/config", access(1), changed)
    write(driver + "/nvidia/capabilities/mig/monitor", access(2), changed)
    pci = STAGE + "/pci-devices"
    for gpu in gpus:
        minor = int(gpu["minor"])
        bus = gpu["bus_id"].lower()[4:]  # 00000000:07:00.0 -> 0000:07:00.0
        wanted_nodes["/dev/nvidia{0}".format(minor)] = (GPU_MAJOR, minor)
        write("{0}/nvidia/gpus/{1}/information".format(driver, bus), gpu_information(gpu), changed)
        for gi in range(MIG_GIS):
            minors.append("gpu{0}/gi{1}/access {2}".format(minor, gi, gi_minor(minor, gi)))
            for ci in range(MIG_CIS):
                minors.append("gpu{0}/gi{1}/ci{2}/access {3}".format(minor, gi, ci, ci_minor(minor, gi, ci)))
        # The driver creates a GPU/compute instance's capability files (and
        # nvidia-modprobe its device node) when the instance is created.
        for gi in gpu.get("gis") or []:
            gi_dir = "{0}/nvidia/capabilities/gpu{1}/mig/gi{2}".format(driver, minor, gi["id"])
            write(gi_dir + "/access", access(gi_minor(minor, gi["id"])), changed)
            wanted_nodes["/dev/nvidia-caps/nvidia-cap{0}".format(gi_minor(minor, gi["id"]))] = (caps_major, gi_minor(minor, gi["id"]))
            for ci in gi.get("cis") or []:
                number = ci_minor(minor, gi["id"], ci["id"])
                write("{0}/ci{1}/access".format(gi_dir, ci["id"]), access(number), changed)
                wanted_nodes["/dev/nvidia-caps/nvidia-cap{0}".format(number)] = (caps_major, number)
        # What nvpci (nvidia-ctk system create-dev-char-symlinks --create-all) reads of a GPU.
        device_id = "0x{0:04x}".format(int(gpu["pci_device_id"]) >> 16)
        subsystem = int(gpu.get("pci_subsystem_id") or 0)
        for name, value in (
            ("vendor", NVIDIA_VENDOR),
            ("device", device_id),
            ("class", CLASS_3D),
            ("numa_node", "-1"),
            ("subsystem_vendor", "0x{0:04x}".format(subsystem & 0xFFFF)),
            ("subsystem_device", "0x{0:04x}".format(subsystem >> 16)),
            ("resource", "0x0000000000000000 0x0000000000000000 0x0000000000000000"),
        ):
            write("{0}/{1}/{2}".format(pci, bus, name), value + "\n", changed)
    write(driver + "/nvidia-caps/mig-minors", "\n".join(minors) + "\n", changed)
    for number in range(int(system.get("nvswitches") or 0)):
        bus = "0000:{0:02x}:00.0".format(NVSWITCH_FIRST_BUS + number)
        for name, value in (("vendor", NVIDIA_VENDOR), ("device", NVSWITCH_DEVICE), ("class", CLASS_BRIDGE_OTHER), ("numa_node", "-1")):
            write("{0}/{1}/{2}".format(pci, bus, name), value + "\n", changed)

    # An empty kernel log of the simulated driver (mode 0600 like /dev/kmsg's
    # records: root reads them), created once; appends keep the same inode.
    if not os.path.exists(KMSG):
        os.makedirs(os.path.dirname(KMSG), exist_ok=True)
        fd = os.open(KMSG, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        changed.append(KMSG)

    # The node's own PCI devices stay visible next to the simulated GPUs.
    real = "/sys/bus/pci/devices"
    if not is_mountpoint(real):
        os.makedirs(pci, exist_ok=True)
        for entry in os.listdir(real):
            link = os.path.join(pci, entry)
            if not os.path.lexists(link):
                os.symlink(os.path.realpath(os.path.join(real, entry)), link)

    # Instances destroyed since the last run lose their device nodes.
    caps_dir = "/dev/nvidia-caps"
    if os.path.isdir(caps_dir):
        for entry in os.listdir(caps_dir):
            path = os.path.join(caps_dir, entry)
            if path not in wanted_nodes:
                os.unlink(path)
                changed.append(path)
    for path, (major, minor) in sorted(wanted_nodes.items()):
        mknod(path, major, minor, changed)

    bind(STAGE + "/proc-devices", "/proc/devices", changed)
    bind(driver, "/proc/driver", changed)
    bind(pci, real, changed)
    bind(KMSG, "/dev/kmsg", changed)
    return {"changed": bool(changed), "paths": changed, "nodes": sorted(wanted_nodes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--uvm-major", type=int, default=510)
    parser.add_argument("--caps-major", type=int, default=511)
    args = parser.parse_args()
    state = json.loads(subprocess.run(["nvml-simctl", "show"], check=True, capture_output=True, text=True).stdout)
    os.makedirs(STAGE, exist_ok=True)
    print(json.dumps(build(state, args.uvm_major, args.caps_major)))


if __name__ == "__main__":
    main()
