"""preflight stops a bad declaration before anything on the node changes.

Each bad declaration is run through playbooks/site.yml against the converged
node, exactly as a user would run it; the node's package list and every file
under /etc must be unchanged, and no later layer (verify included) may run.
Bad declarations are versions that do not fit together (the version matrix)
and pinned artifacts their sources do not have (pinned_artifacts).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

# The scenarios' shared helpers (../../_shared/stack.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "_shared"))

# pylint: disable=wrong-import-position
from stack import scenario_playbook

ROOT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.getcwd()))
EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
REPORTS = EPHEMERAL / "reports"

# Per node: a declaration that does not fit, and what preflight must say.
# (Every rule's messages are pinned by the unit tests; here the point is the
# whole site.yml stopping before any change.)
BAD = {
    "preflight-debian12": ({"preflight_cuda_versions": ["13.0"]}, ["driver 550.127.05 cannot run CUDA 13.0: it needs 580.65.06 or newer"]),
    "preflight-debian13": (
        {"driver_branch": "590", "driver_kernel_module": "open"},
        ["driver R590 does not support Volta GPUs", "driver_kernel_module is open, but GPU 0 (Tesla V100-SXM2-16GB) (volta) needs the proprietary modules"],
    ),
}


def closed_port() -> int:
    """A loopback port nothing listens on: a mirror that is down, without stopping the shared one."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# Pinned artifacts their sources do not have, as a new user declares them.
# Preflight reports every artifact it cannot resolve at once, so one site.yml
# run per node covers its cases (one run per node keeps the scenario's time
# down); each message must name its variable, what the source offers and the
# fix. On Debian 13 the mirror is down for every source the run would use: each
# URL on a closed loopback port (the shared mirror keeps running for the
# others), and each variable must be named with its URL.
DEAD = "http://127.0.0.1:{0}".format(closed_port())
MIG_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    },
}
DEAD_SOURCES = {
    "container_toolkit_apt_repo_url": DEAD + "/libnvidia-container/stable/deb",
    "container_toolkit_gpg_key_url": DEAD + "/keys/gpufleet-mirror.asc",
    "crictl_download_url": DEAD + "/files/cri-tools",
    "driver_distribution_mirror_url": DEAD + "/debian",
    "driver_distribution_key_url": DEAD + "/keys/gpufleet-mirror.asc",
}


def down(variable: str, url: str) -> str:
    return "{0}: {1} is unreachable (connection refused); check the mirror, or set {0} to a source that answers".format(variable, url)


ARTIFACTS = {
    "preflight-debian12": (
        # A digest pinned for a release the mirror lacks: the tarball itself is asked for.
        {
            "container_toolkit_version": "1.99.0",
            "crictl_version": "v9.9.9",
            "crictl_checksums": {"v9.9.9": {"amd64": "0" * 64}},
            "mig_label": "nonexistent",
            "mig_config": MIG_CONFIG,
        },
        [
            "container_toolkit_version 1.99.0 is not offered by the toolkit repository ",
            "(container_toolkit_apt_repo_url): nvidia-container-toolkit-base has 1.20.1, 1.17.8; set container_toolkit_version to one of them",
            "crictl_version v9.9.9 is not published under crictl_download_url for amd64: its tarball ",
            "answered HTTP 404",
            "releases this collection knows: v1.36.0, v1.35.0",
            "set crictl_version to a published release",
            "mig_label: label 'nonexistent' is not in the config; its labels are: all-1g.5gb, all-disabled (mig_config); set mig_label to one of them",
        ],
    ),
    "preflight-debian13": (
        DEAD_SOURCES,
        [
            down("container_toolkit_apt_repo_url", DEAD + "/libnvidia-container/stable/deb/amd64/Packages.gz"),
            down("container_toolkit_gpg_key_url", DEAD + "/keys/gpufleet-mirror.asc"),
            down("driver_distribution_mirror_url", DEAD + "/debian/dists/trixie/InRelease"),
            down("driver_distribution_key_url", DEAD + "/keys/gpufleet-mirror.asc"),
            "crictl_download_url: {0}/files/cri-tools/v".format(DEAD),
            ".tar.gz is unreachable (connection refused); check the mirror, or set crictl_download_url",
        ],
    ),
}


def snapshot(host) -> str:
    """What a change would touch: packages, every file under /etc, gpufleet's state (one round trip). The run's
    lease directory is the run's own bookkeeping, made by site.yml's first call before preflight; the lease in it
    is given back when the run fails (a failed run that kept it would hold up every later run)."""
    return host.check_output(
        "dpkg-query -W -f '${Package} ${Version} ${Status}\\n' | sort;"
        " find /etc -xdev | sort;"
        " find /etc -xdev -type f -print0 | sort -z | xargs -0 sha256sum;"
        " find /var/lib -xdev -path '*gpufleet*' ! -path /var/lib/gpufleet | sort"
    )


def site(limit: str, extra: dict) -> subprocess.CompletedProcess:
    return scenario_playbook(ROOT / "playbooks" / "site.yml", "--limit", limit, "-e", json.dumps(extra))


def host_name(host) -> str:
    return host.backend.get_hostname()


def test_good_declaration_passes_and_changes_nothing(host):
    """Converge ran preflight alone: the node has no gpufleet state at all."""
    assert not host.file("/var/lib/gpufleet").exists


def test_bad_declaration_stops_before_any_change(host):
    extra, messages = BAD[host_name(host)]
    before = snapshot(host)
    run = site(host_name(host), extra)
    assert run.returncode != 0, run.stdout
    for message in messages:
        assert message in run.stdout, run.stdout
    # It stopped in preflight: no later play ran on the host.
    assert "TASK [gpufleet.nvidia.preflight : Stop before anything changes when the declaration does not fit]" in run.stdout
    assert "TASK [Read the GPUs through NVML]" not in run.stdout
    assert snapshot(host) == before
    assert not (REPORTS / "{0}.json".format(host_name(host))).exists()


def test_unresolvable_artifacts_stop_before_any_change(host):
    """Stops in preflight, after the version matrix passed and before any layer ran; the node is as it was."""
    extra, messages = ARTIFACTS[host_name(host)]
    before = snapshot(host)
    run = site(host_name(host), extra)
    assert run.returncode != 0, run.stdout
    for message in messages:
        assert message in run.stdout, run.stdout
    assert "TASK [gpufleet.nvidia.preflight : Stop before anything changes when a pinned artifact cannot be had]" in run.stdout
    assert "TASK [Read the GPUs through NVML]" not in run.stdout
    assert snapshot(host) == before
    assert not (REPORTS / "{0}.json".format(host_name(host))).exists()
