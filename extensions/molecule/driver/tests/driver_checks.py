"""What a node converged by gpufleet.nvidia.driver must show, read from the node itself.

Shared by the driver scenarios. Expectations come from the inventory (the
declared version or branch) and from what the node's repositories offer, never
from a hard-coded answer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

PIN_FILE = "/etc/apt/preferences.d/gpufleet-nvidia-driver"
SOURCES_FILE = "/etc/apt/sources.list.d/gpufleet-nvidia-driver.list"
UNATTENDED_FILE = "/etc/apt/apt.conf.d/51gpufleet-nvidia-driver"
NOUVEAU_FILE = "/etc/modprobe.d/gpufleet-blacklist-nouveau.conf"
KEYRING = "/etc/apt/keyrings/gpufleet-nvidia-distribution.asc"
NO_REBOOT_MARKER = "/run/gpufleet-test-no-reboot"
MODULE_PACKAGE = {"proprietary": "nvidia-kernel-dkms", "open": "nvidia-open-kernel-dkms"}
# Debian's DKMS module names, and the module file they install.
DKMS_MODULE = {"proprietary": "nvidia-current", "open": "nvidia-current-open"}
KERNEL_MODULE = "nvidia-current"


def upstream(version: str) -> str:
    match = re.match(r"^(?:\d+:)?([0-9][0-9.]*[0-9])", version)
    return match.group(1) if match else ""


def natural(version: str) -> list[int]:
    return [int(part) for part in re.findall(r"\d+", version)]


def variables(host) -> dict:
    return host.ansible.get_variables()


def expected_version(host) -> str:
    """The declared exact version, or the newest of the branch the node's repositories offer."""
    declared = variables(host)
    if declared.get("driver_version"):
        return str(declared["driver_version"])
    branch = str(declared.get("driver_branch", ""))
    offered = host.check_output("apt-cache madison %s", MODULE_PACKAGE["proprietary"])
    versions = {upstream(line.split("|")[1].strip()) for line in offered.splitlines() if "|" in line}
    in_branch = sorted((v for v in versions if v.split(".")[0] == branch), key=natural, reverse=True)
    assert in_branch, "the node's repositories offer no %s driver" % branch
    return in_branch[0]


def installed_packages(host) -> dict[str, str]:
    out = host.check_output("dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'")
    packages = {}
    for line in out.splitlines():
        name, version, status = line.split("\t")
        if status[1:2] == "i":
            packages[name] = version
    return packages


def driver_packages(host, version: str) -> dict[str, str]:
    """Every installed package of this driver version."""
    return {n: v for n, v in installed_packages(host).items() if upstream(v) == version}


def held(host) -> set[str]:
    return set(host.check_output("apt-mark showhold").split())


def installed_kernels(host) -> list[str]:
    names = host.check_output("ls /boot").split()
    return sorted(n[len("vmlinuz-") :] for n in names if n.startswith("vmlinuz-"))


def snapshot(host) -> str:
    """What a bad declaration must leave exactly as it was."""
    return host.check_output(
        "find /etc/apt /etc/modprobe.d /etc/dkms -type f -exec sha256sum {} + | sort; "
        # Installed packages only: a purged one can stay in dpkg's status as not-installed.
        "dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n' | awk -F '\\t' 'substr($3, 2, 1) != \"n\"' | sort; "
        "apt-mark showhold; ls /boot /var/lib/dkms/*/ 2>/dev/null | sort"
    )


def run_converge(host_name: str, extra_vars: dict) -> subprocess.CompletedProcess:
    """The scenario's converge playbook on one node with extra vars, as a user would run it."""
    scenario = os.environ["MOLECULE_SCENARIO_DIRECTORY"]
    argv = [
        "ansible-playbook",
        "-i",
        os.environ["MOLECULE_INVENTORY_FILE"],
        os.path.join(scenario, "converge.yml"),
        "--limit",
        host_name,
        "-e",
        json.dumps(extra_vars),
    ]
    run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)
    # Molecule's ansible.cfg prints failures to stderr, as JSON: read one
    # stream, with the messages' quotes as the role wrote them.
    run.stdout = run.stdout.replace('\\"', '"')
    return run
