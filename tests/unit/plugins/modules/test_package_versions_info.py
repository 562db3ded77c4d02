"""package_versions_info: parsers, and the real apt probe against a signed repository built here."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.modules import package_versions_info as pvi
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

MADISON = """nvidia-kernel-dkms | 535.261.03-1 | http://127.0.0.1:8771/debian bookworm/non-free amd64 Packages
nvidia-kernel-dkms | 535.216.03-2~bpo12+1 | http://127.0.0.1:8771/debian bookworm-backports/non-free amd64 Packages
nvidia-kernel-dkms | 535.216.03-2~bpo12+1 | http://mirror.invalid/debian bookworm-backports/non-free amd64 Packages
   nvidia-smi | 535.261.03-1 | http://127.0.0.1:8771/debian bookworm/non-free amd64 Packages
"""


def test_madison_and_repoquery_parsers():
    assert pvi.parse_madison(MADISON) == {"nvidia-kernel-dkms": ["535.261.03-1", "535.216.03-2~bpo12+1"], "nvidia-smi": ["535.261.03-1"]}
    assert pvi.parse_repoquery("nvidia-driver-cuda 3:580.95.05-1.el9\nnvidia-driver-cuda 3:580.82.07-1.el9\n") == {
        "nvidia-driver-cuda": ["3:580.95.05-1.el9", "3:580.82.07-1.el9"]
    }


def test_versions_sort_as_the_package_manager_does():
    debian = ["535.216.03-2~bpo12+1", "535.261.03-1", "535.216.03-2", "535.54.03-1", "1:470.256.02-1", "550.127.05-1~deb12u1", "550.127.05-1"]
    assert pvi.newest_first(debian, pvi.dpkg_key) == [
        "1:470.256.02-1",
        "550.127.05-1",
        "550.127.05-1~deb12u1",
        "535.261.03-1",
        "535.216.03-2",
        "535.216.03-2~bpo12+1",
        "535.54.03-1",
    ]
    rpm = ["3:580.82.07-1.el9", "3:580.95.05-1.el9", "580.105.08-1.el9", "3:580.95.05-1.el9^1"]
    assert pvi.newest_first(rpm, pvi.rpm_key) == ["3:580.95.05-1.el9^1", "3:580.95.05-1.el9", "3:580.82.07-1.el9", "580.105.08-1.el9"]


def test_sources_get_the_key_and_refuse_options():
    assert pvi.signed_source("deb http://x/debian bookworm non-free", "/k.asc") == "deb [signed-by=/k.asc] http://x/debian bookworm non-free"
    with pytest.raises(ValueError):
        pvi.signed_source("deb [trusted=yes] http://x/debian bookworm non-free", "/k.asc")


needs_apt = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("apt-get", "apt-ftparchive", "gpg", "dpkg-deb")), reason="needs apt-get, apt-ftparchive, gpg and dpkg-deb"
)


def gpg(home: Path, *args: str) -> bytes:
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), *args], check=True, capture_output=True).stdout


def make_key(home: Path, name: str) -> tuple[bytes, str]:
    home.mkdir(mode=0o700)
    gpg(home, "--passphrase", "", "--quick-gen-key", name + " <test@gpufleet.invalid>", "rsa2048", "sign", "never")
    fpr = next(line.split(":")[9] for line in gpg(home, "--with-colons", "--list-keys").decode().splitlines() if line.startswith("fpr:"))
    return gpg(home, "--armor", "--export"), fpr


@pytest.fixture(scope="module")
def signed_repo(tmp_path_factory) -> dict:
    """A flat repository with two versions of a dummy package, signed with a throwaway key."""
    work = tmp_path_factory.mktemp("repo")
    repo = work / "repo"
    repo.mkdir()
    for version in ("535.261.03-1", "535.216.03-2~bpo12+1"):
        pkg = work / ("pkg-" + version)
        (pkg / "DEBIAN").mkdir(parents=True)
        (pkg / "DEBIAN" / "control").write_text("Package: nvidia-test-dkms\nVersion: %s\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n" % version)
        subprocess.run(["dpkg-deb", "-b", str(pkg), str(repo / ("nvidia-test-dkms_%s_all.deb" % version))], check=True, capture_output=True)
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True, capture_output=True).stdout
    (repo / "Packages").write_bytes(packages)
    (repo / "Release").write_bytes(subprocess.run(["apt-ftparchive", "release", "."], cwd=repo, check=True, capture_output=True).stdout)
    key, fpr = make_key(work / "gnupg", "repo")
    gpg(work / "gnupg", "--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release"))
    (work / "repo.asc").write_bytes(key)
    other, other_fpr = make_key(work / "gnupg-other", "other")
    (work / "other.asc").write_bytes(other)
    # The pinned key and another in one file, as a tampered key download serves them.
    (work / "both.asc").write_bytes(key + other)
    # The same packages, signed by the other key only.
    forged = work / "forged"
    shutil.copytree(repo, forged)
    (forged / "InRelease").unlink()
    gpg(work / "gnupg-other", "--clearsign", "-o", str(forged / "InRelease"), str(forged / "Release"))
    return {
        "line": "deb file:%s ./" % repo,
        "forged_line": "deb file:%s ./" % forged,
        "key": str(work / "repo.asc"),
        "fpr": fpr,
        "other": str(work / "other.asc"),
        "other_fpr": other_fpr,
        "both_url": "file://%s" % (work / "both.asc"),
        "key_url": "file://%s" % (work / "repo.asc"),
    }


@needs_apt
def test_lists_the_versions_of_a_signed_repository(signed_repo):
    outcome = run_module(
        "package_versions_info",
        {
            "apt_sources": [signed_repo["line"]],
            "key": signed_repo["key"],
            "key_fingerprints": [signed_repo["fpr"]],
            "packages": ["nvidia-test-dkms", "nvidia-absent"],
        },
    )
    assert outcome["kind"] == "exit", outcome
    result = outcome["result"]
    assert result["changed"] is False
    assert result["versions"] == {"nvidia-test-dkms": ["535.261.03-1", "535.216.03-2~bpo12+1"], "nvidia-absent": []}
    assert result["key"]["fingerprints"] == [signed_repo["fpr"]] or signed_repo["fpr"] in result["key"]["fingerprints"]
    assert len(result["key"]["sha256"]) == 64


@needs_apt
def test_a_repository_signed_with_another_key_is_refused(signed_repo):
    outcome = run_module("package_versions_info", {"apt_sources": [signed_repo["line"]], "key": signed_repo["other"], "packages": ["nvidia-test-dkms"]})
    assert outcome["kind"] == "fail"
    assert "apt-get update of the repository failed" in outcome["result"]["msg"]


@needs_apt
def test_a_key_with_the_wrong_fingerprint_is_refused_before_apt_runs(signed_repo):
    outcome = run_module(
        "package_versions_info",
        {
            "apt_sources": [signed_repo["line"]],
            "key": signed_repo["key"],
            "key_fingerprints": ["EB693B3035CD5710E231E123A4B469963BF863CC"],
            "packages": ["nvidia-test-dkms"],
        },
    )
    assert outcome["kind"] == "fail"
    assert "is refused: it holds the key(s) {0}, not the pinned EB693B3035CD5710E231E123A4B469963BF863CC".format(signed_repo["fpr"]) in outcome["result"]["msg"]


@needs_apt
@pytest.mark.parametrize("line", ["line", "forged_line"])
def test_a_key_file_with_the_pinned_key_and_another_is_refused_before_apt_runs(signed_repo, line):
    """Before, apt read the repository with the whole served file, so the other key's signature was accepted."""
    outcome = run_module(
        "package_versions_info",
        {"apt_sources": [signed_repo[line]], "key": signed_repo["both_url"], "key_fingerprints": [signed_repo["fpr"]], "packages": ["nvidia-test-dkms"]},
    )
    assert outcome["kind"] == "fail", outcome
    assert "also {0}, which is not pinned".format(signed_repo["other_fpr"]) in outcome["result"]["msg"]


@needs_apt
def test_a_downloaded_key_is_read_as_gpgs_export_and_returned_for_the_keyring(signed_repo):
    args = {
        "apt_sources": [signed_repo["line"]],
        "key": signed_repo["key_url"],
        "key_fingerprints": [signed_repo["fpr"].lower()],
        "packages": ["nvidia-test-dkms"],
    }
    outcome = run_module("package_versions_info", args)
    assert outcome["kind"] == "exit", outcome
    key = outcome["result"]["key"]
    assert key["fingerprints"] == [signed_repo["fpr"]] and key["export"].startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----")
    # The export holds the pinned key alone: the repository signed by the other key does not verify with it.
    forged = run_module("package_versions_info", {**args, "apt_sources": [signed_repo["forged_line"]]})
    assert forged["kind"] == "fail" and "apt-get update of the repository failed" in forged["result"]["msg"]


@needs_apt
def test_a_downloaded_key_without_a_fingerprint_is_refused_unless_allowed(signed_repo):
    args = {"apt_sources": [signed_repo["line"]], "key": signed_repo["both_url"], "packages": ["nvidia-test-dkms"]}
    refused = run_module("package_versions_info", args)
    assert refused["kind"] == "fail" and refused["result"]["msg"].startswith("key_fingerprints: empty"), refused
    allowed = run_module("package_versions_info", {**args, "allow_unpinned_key": True})
    assert allowed["kind"] == "exit", allowed
    assert sorted(allowed["result"]["key"]["fingerprints"]) == sorted([signed_repo["fpr"], signed_repo["other_fpr"]])
    assert any("trusted unchecked (allow_unpinned_key)" in w for w in allowed["result"].get("warnings", [])), allowed["result"]


@pytest.mark.parametrize(
    ("option", "args"),
    [
        ("key", {"apt_sources": ["deb https://mirror.invalid/debian bookworm main"], "key": "https://fleet:hunter2-8f2c@mirror.invalid/key.asc"}),
        ("apt_sources", {"apt_sources": ["deb https://fleet:hunter2-8f2c@mirror.invalid/debian bookworm main"], "key": "/usr/share/keyrings/x.gpg"}),
        ("dnf_baseurl", {"dnf_baseurl": "https://fleet:hunter2-8f2c@mirror.invalid/el9", "key": "/etc/pki/x.asc"}),
    ],
)
def test_a_url_with_credentials_is_refused_before_anything_is_fetched_and_masked(option, args):
    # Issue 37: the URL is echoed in the result; the probe's scratch apt gives no login anyway.
    outcome = run_module("package_versions_info", dict(args, packages=["nvidia-test-dkms"]))
    assert outcome["kind"] == "fail", outcome
    assert outcome["result"]["msg"].startswith(option + ": "), outcome
    assert "hunter2-8f2c" not in str(outcome["result"])
