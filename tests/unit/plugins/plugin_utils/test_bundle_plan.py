# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The offline bundle's plan (plugin_utils/_bundle.py) on the roles' real data:
judgement, per-host needs, the fleet merge, and what is written. The playbook
end of it (Jinja glue, messages in a run) is tests/unit/playbooks/test_bundle.py;
a bundle really fetched, written and installed from is the Molecule scenario's."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.gpufleet.nvidia.plugins.module_utils._knowledge import drivers as drivers_kb
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _bundle

ROLES = Path(__file__).resolve().parents[4] / "roles"
SITE = "0123456789ABCDEF0123456789ABCDEF01234567"
MIRROR = "https://mirror.example.internal/gpufleet"


def load(path: str) -> dict:
    return yaml.safe_load((ROLES / path).read_text()) or {}


DEFAULTS = {role: load(role + "/defaults/main.yml") for role in ("driver", "container_toolkit", "crictl")}


def role_data(distribution: str = "Debian", major: str = "12", tag: str = "-580") -> dict:
    """The roles' data for one OS, with the per-OS templates the role settles filled in as it would."""
    driver = load("driver/vars/main.yml")
    driver.update(load("driver/vars/{0}.yml".format(distribution)))
    driver.update(load("driver/vars/{0}-{1}.yml".format(distribution, major)))
    crictl = load("crictl/vars/main.yml")
    return {
        "driver_version_pattern": driver["__driver_version_pattern"],
        "driver_packages": driver["__driver_packages"],
        "driver_independent_packages": driver.get("__driver_independent_packages", {}),
        "driver_fabricmanager_packages": {"cuda": ["nvidia-fabricmanager" + tag], "distribution": []},
        "driver_nvlsm_packages": driver["__driver_nvlsm_packages"],
        # The role's vars read it from the knowledge base (a lookup this test does not template).
        "driver_nvlsm_architectures": drivers_kb.NVLSM["value"]["architectures"],
        "driver_cuda_repo_arch": driver["__driver_cuda_repo_arch"],
        "driver_cuda_repo_key": driver["__driver_cuda_repo_key"],
        "driver_cuda_repo_fingerprint": driver["__driver_cuda_repo_fingerprint"],
        "driver_distribution_repo": {k: v for k, v in driver["__driver_distribution_repo"].items() if k != "suites"},
        "container_toolkit_packages": {
            "full": ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"],
            "base": ["nvidia-container-toolkit-base"],
        },
        "container_toolkit_extension_packages": ["nvidia-container-toolkit-operator-extensions"],
        "crictl_release_for_kubernetes": crictl["__crictl_release_for_kubernetes"],
        "crictl_sha256": crictl["__crictl_sha256"],
    }


def declaration(**over) -> dict:
    """The air-gapped example's declaration for an H200 node: every URL under the mirror, the site key."""
    decl = {}
    for defaults in DEFAULTS.values():
        decl.update(defaults)
    decl.update(
        {
            "driver_source": "cuda",
            "driver_version": "580.95.05",
            "driver_gpu_models": ["H200"],
            "driver_cuda_repo_url": MIRROR + "/cuda/repos",
            "driver_cuda_repo_key_url": MIRROR + "/keys/site.asc",
            "driver_cuda_repo_key_fingerprint": SITE,
            "container_toolkit_version": "1.20.1",
            "container_toolkit_apt_repo_url": MIRROR + "/libnvidia-container/stable/deb",
            "container_toolkit_gpg_key_url": MIRROR + "/keys/site.asc",
            "container_toolkit_gpg_key_fingerprint": SITE,
            "crictl_version": "v1.33.0",
            "crictl_download_url": MIRROR + "/cri-tools",
        }
    )
    decl.update(over)
    return decl


def request(platform: dict | None = None, **over) -> dict:
    platform = platform or {"distribution": "Debian", "version": "12", "release": "bookworm", "architecture": "x86_64"}
    # A platform the bundle does not carry has no data of its own: the plan stops before it reads any.
    known = platform.get("distribution") in _bundle.DISTRIBUTIONS and "version" in platform
    data = role_data(platform["distribution"], str(platform["version"]).split(".", maxsplit=1)[0]) if known else {}
    req = {"platform": platform, "mirror_url": MIRROR + "/", "signing_key": SITE.lower(), "upstream": {}, "role_defaults": DEFAULTS, "role_data": data}
    req.update(over)
    return req


def plan(decl: dict | None = None, req: dict | None = None) -> dict:
    return _bundle.host_plan(decl or declaration(), req or request())


# --- one host -----------------------------------------------------------------------------------


def test_a_cuda_host_needs_the_cuda_repository_with_its_pinned_packages_and_fabric_manager():
    result = plan()
    assert result["errors"] == []
    driver, toolkit = result["repos"]
    assert driver["dest"] == "cuda/repos/debian12/x86_64"
    assert driver["source"] == DEFAULTS["driver"]["driver_cuda_repo_url"].rstrip("/") + "/debian12/x86_64"
    # NVIDIA's own key in the repository directory, checked against the role's fingerprint for Debian 12.
    assert driver["key"] == driver["source"] + "/3bf863cc.pub"
    assert driver["key_fingerprints"] == ["EB693B3035CD5710E231E123A4B469963BF863CC"]
    assert driver["packages"] == [
        {"name": "nvidia-driver-cuda", "upstream_version": "580.95.05"},
        {"name": "nvidia-kernel-open-dkms", "upstream_version": "580.95.05"},
        {"name": "nvidia-driver-pinning-580.95.05", "required": False},
        {"name": "nvidia-fabricmanager-580", "upstream_version": "580.95.05", "required": False},
    ]
    assert toolkit["dest"] == "libnvidia-container/stable/deb/amd64"
    assert toolkit["packages"][0] == {"name": "nvidia-container-toolkit", "version": "1.20.1-1"}
    assert result["files"] == [
        {
            "dest": "cri-tools/v1.33.0/crictl-v1.33.0-linux-amd64.tar.gz",
            "url": DEFAULTS["crictl"]["crictl_download_url"] + "/v1.33.0/crictl-v1.33.0-linux-amd64.tar.gz",
            "sha256": load("crictl/vars/main.yml")["__crictl_sha256"]["v1.33.0"]["amd64"],
        }
    ]
    # Both layers point at one key file: it is published once.
    assert result["key_paths"] == ["keys/site.asc"]


def test_blackwell_brings_nvlsm_and_fabric_manager_true_is_required():
    packages = plan(declaration(driver_gpu_models=["B200"], driver_fabricmanager=True))["repos"][0]["packages"]
    assert {"name": "nvidia-fabricmanager-580", "upstream_version": "580.95.05", "required": True} in packages
    assert {"name": "nvlsm", "required": False} in packages


def test_a_debian_distribution_host_reads_its_suites_from_the_distribution_archive():
    decl = declaration(
        driver_source="distribution",
        driver_version="535.261.03",
        driver_distribution_backports=True,
        driver_kernel_module="proprietary",
        driver_distribution_mirror_url=MIRROR + "/debian/",
        driver_distribution_key_url=MIRROR + "/keys/site.asc",
    )
    upstream = {"driver_distribution_url": "http://staging.invalid/debian", "driver_distribution_key": "k.asc", "driver_distribution_key_fingerprints": ["AB"]}
    driver = plan(decl, request(upstream=upstream))["repos"][0]
    assert driver["dest"] == "debian"
    assert driver["suites"] == ["bookworm", "bookworm-backports"]
    assert driver["components"] == ["contrib", "non-free", "non-free-firmware"]
    assert (driver["source"], driver["key"], driver["key_fingerprints"]) == ("http://staging.invalid/debian", "k.asc", ["AB"])
    # nvidia-persistenced has its own version in Debian.
    assert {"name": "nvidia-persistenced", "upstream_version": ""} in driver["packages"]


def test_an_ubuntu_cuda_host_uses_the_ubuntu_repository_name_and_sbsa_on_arm():
    platform = {"distribution": "Ubuntu", "version": "24.04", "release": "noble", "architecture": "aarch64"}
    result = plan(declaration(), request(platform))
    assert result["errors"] == []
    assert result["repos"][0]["dest"] == "cuda/repos/ubuntu2404/sbsa"
    assert result["repos"][0]["architecture"] == "arm64"
    assert result["files"][0]["dest"].endswith("linux-arm64.tar.gz")


def test_layers_not_managed_carry_nothing():
    result = plan(declaration(driver_state="absent", container_toolkit_repo_manage=False))
    assert result["errors"] == [] and result["repos"] == []
    assert [f["dest"] for f in result["files"]] == ["cri-tools/v1.33.0/crictl-v1.33.0-linux-amd64.tar.gz"]
    assert result["key_paths"] == []


@pytest.mark.parametrize(
    "over,message",
    [
        ({"driver_version": "580"}, 'driver_version is "580": the bundle carries exact versions'),
        ({"driver_module_build": "precompiled"}, "driver_module_build is precompiled: the bundle carries DKMS packages only"),
        ({"driver_kernel_module": "proprietary", "driver_gpu_models": ["B200"]}, "driver_kernel_module: proprietary cannot drive B200 (blackwell)"),
        ({"container_toolkit_version": "1.20"}, 'container_toolkit_version is "1.20": pin it'),
        ({"crictl_version": "", "crictl_kubernetes_version": "1.12"}, 'crictl_kubernetes_version "1.12" has no cri-tools release in the crictl role'),
        ({"crictl_version": "v1.37.0"}, "crictl_checksums has no sha256 for v1.37.0 amd64"),
        (
            {"crictl_download_url": "https://github.invalid/cri-tools"},
            'crictl_download_url is "https://github.invalid/cri-tools", not under bundle_mirror_url "' + MIRROR + '"',
        ),
        (
            {"container_toolkit_gpg_key_fingerprint": "AB CD"},
            'container_toolkit_gpg_key_fingerprint is "AB CD", but the bundle is signed with bundle_signing_key ' + SITE,
        ),
    ],
)
def test_what_the_bundle_cannot_carry_is_named_with_the_fix(over, message):
    result = plan(declaration(**over))
    assert any(message in error for error in result["errors"]), result["errors"]
    assert result["repos"] == [] and result["files"] == []


def test_every_problem_is_reported_at_once():
    errors = plan(declaration(driver_version="", container_toolkit_version="x", crictl_version="v1.37.0"))["errors"]
    assert [e.split(" ")[0] for e in errors] == ["driver_version", "container_toolkit_version", "crictl_checksums"]


def test_a_checksum_of_the_users_own_satisfies_the_table():
    result = plan(declaration(crictl_version="v1.37.0", crictl_checksums={"v1.37.0": {"amd64": "f" * 64}}))
    assert result["errors"] == [] and result["files"][0]["sha256"] == "f" * 64


def test_ubuntu_distribution_packages_are_refused():
    platform = {"distribution": "Ubuntu", "version": "24.04", "release": "noble", "architecture": "x86_64"}
    errors = plan(declaration(driver_source="distribution"), request(platform))["errors"]
    assert "driver_source is distribution on Ubuntu" in errors[0]


@pytest.mark.parametrize(
    "platform,mirror,start",
    [
        ({"distribution": "Debian"}, MIRROR, 'bundle_platform is {"distribution": "Debian"}: the bundle never contacts'),
        ({"distribution": "RedHat", "version": "9", "release": "x", "architecture": "x86_64"}, MIRROR, "bundle_platform"),
        (
            {"distribution": "Debian", "version": "12", "release": "bookworm", "architecture": "x86_64"},
            "",
            "bundle_mirror_url: give the URL the nodes will reach the bundle at",
        ),
    ],
)
def test_the_platform_and_mirror_are_judged_first_and_alone(platform, mirror, start):
    errors = _bundle.host_plan(declaration(driver_version=""), request(platform, mirror_url=mirror))["errors"]
    assert len(errors) == 1 and errors[0].startswith(start), errors


# --- the run's inputs -----------------------------------------------------------------------------

IMAGE = {
    "name": "registry.example.internal/gpufleet/cuda-probe:1.0",
    "digest": "sha256:" + "5" * 64,
    "archive_url": "https://staging.invalid/images/cuda-probe-1.0.oci.tar",
    "archive_checksum": "a" * 64,
}


def test_a_good_request_has_no_errors():
    assert _bundle.request_errors({"group": "gpu_nodes", "hosts": ["a"], "bundle_dir": "/srv/b", "signing_key": SITE, "images": [IMAGE]}) == []


def test_request_errors_come_in_the_order_the_run_reports_them():
    errors = _bundle.request_errors({"group": "gpus", "hosts": [], "bundle_dir": "rel", "signing_key": "x", "images": [IMAGE, dict(IMAGE, digest="sha256:ab")]})
    assert errors[0].startswith("gpufleet_gpu_group: the inventory has no host in group 'gpus'")
    # bundle_dir first; the key is judged only once the directory is right.
    assert errors[1].startswith("bundle_dir: give the absolute path")
    assert errors[2] == (
        'bundle_images[1].digest is "sha256:ab": pin the image manifest digest, sha256:<64 hex'
        " digits> (what name@sha256:... pins); bundle_images: two archives are named"
        " cuda-probe-1.0.oci.tar and would both go to images/cuda-probe-1.0.oci.tar; give them"
        " distinct file names"
    )
    assert _bundle.request_errors({"group": "g", "hosts": ["a"], "bundle_dir": "/d", "signing_key": SITE[:-1], "images": []})[0].startswith(
        "bundle_signing_key: give the 40-hex-digit"
    )


@pytest.mark.parametrize(
    "images,start",
    [
        ({"name": "x"}, "bundle_images: give a list"),
        ("x", "bundle_images: give a list"),
        (["x"], "bundle_images[0]: give a mapping"),
        ([dict(IMAGE, name="Bad@x")], 'bundle_images[0].name is "Bad@x"'),
        ([dict(IMAGE, archive_url="images/x.tar")], 'bundle_images[0].archive_url is "images/x.tar"'),
        ([dict(IMAGE, archive_checksum="md5:1")], 'bundle_images[0].archive_checksum is "md5:1"'),
    ],
)
def test_image_errors_name_the_entry_and_field(images, start):
    assert _bundle.image_errors(images)[0].startswith(start)


# --- the fleet ------------------------------------------------------------------------------------


def test_hosts_on_two_releases_share_one_archive_each_with_its_own_set():
    d12 = declaration(
        driver_source="distribution",
        driver_version="535.261.03",
        driver_kernel_module="proprietary",
        driver_distribution_mirror_url=MIRROR + "/debian",
        driver_distribution_key_url=MIRROR + "/k.asc",
    )
    d13 = dict(d12, driver_version="550.163.01")
    trixie = {"distribution": "Debian", "version": "13", "release": "trixie", "architecture": "x86_64"}
    hosts = {"b": plan(d13, request(trixie)), "a": plan(d12)}
    merged = _bundle.bundle_plan(hosts, [IMAGE], "/srv/b/")
    assert merged["errors"] == []
    debian = next(r for r in merged["repos"] if r["dest"] == "debian")
    assert debian["suites"] == ["trixie", "bookworm"] and debian["hosts"] == ["b", "a"]
    assert [s["prefer_upstream_version"] for s in debian["sets"]] == ["550.163.01", "535.261.03"]
    assert [r["dest"] for r in merged["repos"]] == ["debian", "libnvidia-container/stable/deb/amd64"]
    assert len(merged["files"]) == 1 and merged["key_paths"] == ["k.asc", "keys/site.asc"]
    assert merged["images"][0]["dest"] == "images/cuda-probe-1.0.oci.tar"
    assert merged["images"][0]["sha256"] == "a" * 64
    assert merged["dirs"] == ["/srv/b", "/srv/b//cri-tools/v1.33.0", "/srv/b//keys", "/srv/b//images"]


def test_hosts_that_put_different_upstreams_at_one_place_are_named():
    other = request(upstream={"driver_cuda_repo_url": "https://elsewhere.invalid/cuda"})
    merged = _bundle.bundle_plan({"a": plan(), "b": plan(None, other)}, [], "/srv/b")
    assert merged["errors"] == [
        "Hosts put different upstream repositories (or checksums) at the same place in the bundle:"
        " cuda/repos/debian12/x86_64, cri-tools/v1.33.0/crictl-v1.33.0-linux-amd64.tar.gz (hosts b); give them"
        " separate mirror variables, or the same declaration."
    ]


def test_a_crictl_release_is_carried_only_with_a_pinned_digest():
    # Issue 37: crictl_checksum_source: release took the digest from upstream's .sha256, beside the tarball.
    result = plan(declaration(crictl_version="v1.37.0", crictl_checksum_source="release"))
    assert result["errors"] == ["crictl_checksums has no sha256 for v1.37.0 amd64 and neither has the crictl role's table: add it to crictl_checksums"]
    assert result["files"] == []
    pinned = plan(declaration(crictl_version="v1.37.0", crictl_checksum_source="release", crictl_checksums={"v1.37.0": {"amd64": "f" * 64}}))
    assert [f["sha256"] for f in pinned["files"]] == ["f" * 64]


def test_two_checksums_for_one_tarball_are_a_conflict():
    mine = plan(declaration(crictl_checksums={"v1.33.0": {"amd64": "f" * 64}}))
    assert _bundle.bundle_plan({"a": plan(), "b": mine}, [], "/d")["errors"]


# --- after upstream answered ----------------------------------------------------------------------


def read_result(rc=0, sha="a" * 64, manifests=None, **item):
    image = dict(_bundle.image_list([IMAGE])[0], **item)
    answer = {"sha256": sha, "manifests": manifests if manifests is not None else [{"digest": IMAGE["digest"], "name": IMAGE["name"]}]}
    return {"rc": rc, "stdout": json.dumps(answer) if rc == 0 else "", "stderr_lines": ["boom"], "item": image}


@pytest.mark.parametrize(
    "result,start",
    [
        (read_result(), ""),
        (read_result(rc=1), "archive_url: cannot read https://staging.invalid/images/cuda-probe-1.0.oci.tar as an OCI archive: boom"),
        (read_result(sha="c" * 64), "archive_checksum: https://staging.invalid/images/cuda-probe-1.0.oci.tar has sha256 " + "c" * 64),
        (read_result(manifests=[]), "digest: the archive's index.json names manifest none, not the pinned"),
        (read_result(manifests=[{"digest": IMAGE["digest"], "name": "other"}]), 'name: the archive names the image "other"'),
    ],
)
def test_an_image_read_is_judged_against_its_pins(result, start):
    problem = _bundle.image_problem(result)
    assert problem.startswith(start) and (problem == "") == (start == "")


def test_check_mode_cannot_stage_the_files_of_directories_it_has_not_created():
    merged = _bundle.bundle_plan({"a": plan()}, [IMAGE], "/srv/b")
    assert _bundle.unstaged(merged, "/srv/b", ["/srv/b/images"]) == [
        "images/cuda-probe-1.0.oci.tar",
        "images/cuda-probe-1.0.oci.tar.sha256",
        "images/cuda-probe-1.0.oci.tar.digest",
    ]
    assert _bundle.unstaged(merged, "/srv/b", []) == []
    assert "manifest.json" in _bundle.unstaged(merged, "/srv/b", ["/srv/b"])


def test_the_manifest_lists_every_artifact_with_its_sha256_sorted_by_path():
    files = [{"dest": "cri-tools/v/crictl.tar.gz", "url": "u/crictl.tar.gz", "sha256": "a" * 64}]
    images = _bundle.image_list([IMAGE])
    repos = [
        {
            "item": {"dest": "Debian"},
            "artifacts": [{"artifact": "pool/x.deb", "source": "s", "sha256": "d", "package": "x=1"}],
            "upstream": {"fingerprint": "F"},
            "external": ["dkms"],
        }
    ]
    written = _bundle.manifest("ab cd", repos, files, images, ["keys/site.asc"], "KEY")
    assert written["signing_key"] == "ABCD"
    paths = [a["artifact"] for a in written["artifacts"]]
    # Jinja's sort: case-insensitive, so Debian/ sorts among the lower-case paths.
    assert paths == [
        "cri-tools/v/crictl.tar.gz",
        "cri-tools/v/crictl.tar.gz.sha256",
        "Debian/pool/x.deb",
        "images/cuda-probe-1.0.oci.tar",
        "images/cuda-probe-1.0.oci.tar.digest",
        "images/cuda-probe-1.0.oci.tar.sha256",
        "keys/site.asc",
    ]
    by_path = {a["artifact"]: a for a in written["artifacts"]}
    assert by_path["cri-tools/v/crictl.tar.gz.sha256"] == {
        "artifact": "cri-tools/v/crictl.tar.gz.sha256",
        "package": "",
        "source": "crictl role table",
        "sha256": hashlib.sha256(("a" * 64 + "\n").encode()).hexdigest(),
    }
    assert by_path["keys/site.asc"]["sha256"] == hashlib.sha256(b"KEY\n").hexdigest()
    assert by_path["images/cuda-probe-1.0.oci.tar"]["image"] == IMAGE["name"] + "@" + IMAGE["digest"]
    assert written["upstream"] == {"Debian": {"fingerprint": "F"}} and written["external"] == {"Debian": ["dkms"]}


def test_data_files_are_the_roles_vars_and_the_driver_os_files_of_a_carried_platform():
    debian = _bundle.data_files({"distribution": "Debian", "version": "12.4"}, "/r")
    assert debian[3:] == ["/r/driver/vars/Debian.yml", "/r/driver/vars/Debian-12.yml"]
    assert _bundle.data_files({"distribution": "RedHat", "version": "9"}, "/r") == [
        "/r/driver/vars/main.yml",
        "/r/container_toolkit/vars/main.yml",
        "/r/crictl/vars/main.yml",
    ]
    assert all(Path(p).is_file() for p in _bundle.data_files({"distribution": "Debian", "version": "13"}, str(ROLES)))


def test_unique_and_sort_follow_jinja_and_ansible():
    assert _bundle.unique(["b", "A", "a", "B", "c"]) == ["b", "A", "c"]
    assert _bundle.unique([{"x": 1}, {"x": 1}, {"x": 2}]) == [{"x": 1}, {"x": 2}]
