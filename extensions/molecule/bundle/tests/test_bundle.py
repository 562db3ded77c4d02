"""The node converged from the offline bundle alone; the bundle is what its
manifest says; bundle.yml re-runs with nothing to do, predicts in check mode
and stops bad input before it writes anything."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import subprocess
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import pytest
import yaml

EPHEMERAL = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"])
BUNDLE = EPHEMERAL / "bundle"
GNUPG = EPHEMERAL / "site-gnupg"
PROJECT = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
TEST_MIRROR = os.environ.get("GPUFLEET_MIRROR_URL", "http://127.0.0.1:8765")
BUNDLE_URL = "http://127.0.0.1:8780"
RECAP = re.compile(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)\s+unreachable=\d+\s+failed=(\d+)", re.MULTILINE)


def manifest() -> dict:
    return json.loads((BUNDLE / "manifest.json").read_text())


def bundle_playbook(*args: str, extra: dict | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    argv = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PROJECT / "playbooks" / "bundle.yml"), *args]
    if extra:
        argv += ["-e", json.dumps(extra)]
    # Molecule forces colour for its own runs; the recap is read as plain text.
    run = subprocess.run(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"),
        check=False,
        timeout=600,
    )
    run.stdout = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout).replace('\\"', '"')
    return run, {m.group(1): {"changed": int(m.group(2)), "failed": int(m.group(3))} for m in RECAP.finditer(run.stdout)}


# --- the node -----------------------------------------------------------------


def test_the_test_mirror_is_unreachable_from_the_node(host):
    probe = host.run("python3 -c \"import urllib.request as u; u.urlopen('%s/', timeout=5)\"" % TEST_MIRROR)
    assert probe.rc != 0
    assert "Connection refused" in probe.stderr or "timed out" in probe.stderr, probe.stderr


def test_the_nodes_nvidia_sources_name_only_the_bundle(host):
    listed = host.check_output("grep -rh '^[^#]' /etc/apt/sources.list.d/").splitlines()
    nvidia = [line for line in listed if "nvidia" in line.lower() or "127.0.0.1" in line]
    assert nvidia, listed
    for line in listed:
        if line.startswith(("deb ", "URIs:")):
            assert BUNDLE_URL in line, line
    assert "8765" not in host.check_output("cat /etc/apt/sources.list /etc/apt/sources.list.d/*")


@pytest.mark.parametrize(
    "package,version,origin",
    [
        ("nvidia-kernel-dkms", "550.163.01-2", BUNDLE_URL + "/debian trixie/non-free"),
        ("libcuda1", "550.163.01-2", BUNDLE_URL + "/debian trixie/non-free"),
        ("nvidia-persistenced", "550.163.01-1", BUNDLE_URL + "/debian trixie/contrib"),
        ("nvidia-container-toolkit-base", "1.20.1-1", BUNDLE_URL + "/libnvidia-container/stable/deb/amd64"),
    ],
)
def test_the_pinned_packages_came_from_the_bundle(host, package, version, origin):
    assert host.package(package).version == version
    policy = host.check_output("apt-cache policy %s" % package)
    assert origin in policy, policy


def test_the_bundle_server_served_what_the_node_installed(host):
    log = host.check_output("journalctl -u gpufleet-bundle-http --no-pager -o cat")
    # apt asks for a flat repository's "./name.deb" as it stands in the index.
    served = {posixpath.normpath(path) for path in re.findall(r'"GET (\S+) HTTP/[0-9.]+" 200', log)}
    debs = [a["artifact"] for a in manifest()["artifacts"] if a["artifact"].endswith(".deb")]
    for name in ("nvidia-kernel-dkms_550.163.01-2", "libnvidia-ml1_550.163.01-2", "nvidia-container-toolkit-base_1.20.1-1"):
        path = next(d for d in debs if name in d)
        assert "/" + path in served, sorted(served)
    assert "/cri-tools/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz" in served
    assert "/debian/dists/trixie/InRelease" in served


def test_the_layers_work(host):
    assert host.check_output("/usr/local/bin/crictl --config /dev/null --version").split()[-1] == "v1.36.0"
    assert "1.20.1" in host.check_output("nvidia-ctk --version")
    held = host.check_output("dpkg --get-selections nvidia-kernel-dkms nvidia-container-toolkit-base")
    assert held.split() == ["nvidia-kernel-dkms", "hold", "nvidia-container-toolkit-base", "hold"], held


# --- the bundle (controller side) --------------------------------------------


def test_every_artifact_is_what_the_manifest_says():
    artifacts = manifest()["artifacts"]
    assert artifacts
    for artifact in artifacts:
        data = (BUNDLE / artifact["artifact"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == artifact["sha256"], artifact["artifact"]
        if artifact["artifact"].endswith((".deb", ".tar.gz")):
            assert artifact["source"].startswith(TEST_MIRROR + "/"), artifact
    on_disk = {str(p.relative_to(BUNDLE)) for p in BUNDLE.rglob("*") if p.is_file()}
    assert on_disk - {"manifest.json"} == {a["artifact"] for a in artifacts}


def test_the_bundle_carries_the_closure_and_leaves_main_out():
    data = manifest()
    debs = {a["package"].split("=")[0] for a in data["artifacts"] if a["package"]}
    # The pinned set, and dependencies only contrib/non-free have.
    assert {
        "nvidia-kernel-dkms",
        "libcuda1",
        "nvidia-smi",
        "nvidia-persistenced",
        "nvidia-kernel-support",
        "firmware-nvidia-gsp",
        "nvidia-container-toolkit-base",
    } <= debs
    # The other flavour is not declared, so not carried.
    assert "nvidia-open-kernel-dkms" not in debs
    external = data["external"]["debian"]
    assert any(item.startswith("dkms") for item in external), external
    assert any(item.startswith("libc6") for item in external), external


def test_the_image_archive_is_carried_with_its_pinned_digest():
    name = "pause-3.10-gpufleet.oci.tar"
    archive = BUNDLE / "images" / name
    with urllib.request.urlopen(TEST_MIRROR + "/files/images/" + name + ".digest", timeout=10) as answer:
        pinned = answer.read().decode().strip()
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))
    assert [m["digest"] for m in index["manifests"]] == [pinned]
    assert (BUNDLE / "images" / (name + ".digest")).read_text() == pinned + "\n"
    assert (BUNDLE / "images" / (name + ".sha256")).read_text() == hashlib.sha256(archive.read_bytes()).hexdigest() + "\n"
    entry = next(a for a in manifest()["artifacts"] if a["artifact"] == "images/" + name)
    prefix = os.environ.get("GPUFLEET_IMAGE_PREFIX", "localhost/gpufleet")
    assert entry["image"] == prefix + "/pause:3.10-gpufleet@" + pinned
    assert entry["source"] == TEST_MIRROR + "/files/images/" + name


@pytest.mark.parametrize("repository", ["debian/dists/trixie", "libnvidia-container/stable/deb/amd64"])
def test_the_repositories_are_signed_with_the_site_key_only(repository):
    site = subprocess.run(
        ["gpgv", "--keyring", str(GNUPG / "pubring.kbx"), str(BUNDLE / repository / "InRelease")], capture_output=True, text=True, check=False
    )
    assert site.returncode == 0, site.stderr
    with tempfile.TemporaryDirectory() as home, urllib.request.urlopen(TEST_MIRROR + "/keys/gpufleet-mirror.gpg", timeout=10) as answer:
        keyring = Path(home) / "mirror.gpg"
        keyring.write_bytes(answer.read())
        other = subprocess.run(["gpgv", "--keyring", str(keyring), str(BUNDLE / repository / "InRelease")], capture_output=True, text=True, check=False)
    assert other.returncode != 0


def test_the_index_lists_exactly_the_carried_packages():
    listed = set()
    for packages in BUNDLE.rglob("Packages"):
        for stanza in packages.read_text().split("\n\n"):
            fields = dict(re.findall(r"^(Filename|SHA256): (.*)$", stanza, re.MULTILINE))
            if fields:
                base = packages.parent if "dists" not in packages.parts else BUNDLE / "debian"
                path = Path(os.path.normpath(base / fields["Filename"]))
                listed.add(str(path.relative_to(BUNDLE)))
                assert hashlib.sha256(path.read_bytes()).hexdigest() == fields["SHA256"]
    debs = {str(p.relative_to(BUNDLE)) for p in BUNDLE.rglob("*.deb")}
    assert listed == debs


# --- bundle.yml as a user runs it ----------------------------------------------


def test_a_second_run_changes_nothing():
    run, recap = bundle_playbook()
    assert run.returncode == 0, run.stdout[-3000:]
    assert recap["localhost"]["changed"] == 0, run.stdout[-3000:]


def test_check_mode_predicts_a_new_bundle_and_writes_nothing(tmp_path):
    target = tmp_path / "fresh"
    run, recap = bundle_playbook("--check", extra={"bundle_dir": str(target)})
    assert run.returncode == 0, run.stdout[-3000:]
    assert recap["localhost"]["changed"] > 0
    assert not target.exists()


# Declarations the bundle refuses before reading upstream are tests/unit/playbooks/test_bundle.py's;
# these need a real upstream to answer (or not). One run: every repository is read before anything is
# written, and each failure is reported.
def test_upstream_failures_stop_before_anything_is_written(tmp_path):
    target = tmp_path / "bundle"
    # The host's other upstream sources stay as the scenario declares them.
    group_vars = Path(os.environ["MOLECULE_INVENTORY_FILE"]).parent / "group_vars" / "gpu_nodes"
    upstream = dict(yaml.safe_load(group_vars.read_text())["bundle_upstream"])
    upstream["container_toolkit_apt_repo_url"] = "http://127.0.0.1:9/nowhere"
    run, _recap = bundle_playbook(extra={"bundle_dir": str(target), "bundle_upstream": upstream, "driver_version": "550.1.1"})
    assert run.returncode != 0
    for message in (
        "bundle_upstream.container_toolkit_apt_repo_url: cannot fetch http://127.0.0.1:9/nowhere/amd64/InRelease",
        "bundle_upstream.driver_distribution_url: " + TEST_MIRROR + "/debian (trixie) does not offer: nvidia-kernel-dkms 550.1.1 (offered: 550.163.01-2)",
    ):
        assert message in run.stdout, run.stdout[-3000:]
    assert not target.exists()
