"""bundle_apt_repository against signed upstream repositories built here (local directories).

Upstream is signed with one throwaway key, the bundle with another (the site
key): the module must refuse what the upstream key did not sign, carry the
closure byte for byte, publish an index apt accepts under the site key only,
and report no change on a second run."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import shutil
import subprocess
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import run_module

pytestmark = pytest.mark.skipif(not shutil.which("gpg"), reason="needs gpg")


def gpg(home: Path, *args: str, data: bytes | None = None) -> bytes:
    return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), *args], input=data, capture_output=True, check=True).stdout


def make_key(home: Path, uid: str) -> str:
    home.mkdir(mode=0o700)
    gpg(home, "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
    listed = gpg(home, "--with-colons", "--list-keys").decode()
    return next(line.split(":")[9] for line in listed.splitlines() if line.startswith("fpr:"))


def deb(name: str, version: str, depends: str = "", filename: str = "") -> tuple[str, bytes]:
    payload = "{0} {1} payload".format(name, version).encode()
    stanza = "Package: {0}\nVersion: {1}\nArchitecture: amd64\n".format(name, version)
    if depends:
        stanza += "Depends: {0}\n".format(depends)
    stanza += "Filename: {0}\nSize: {1}\nSHA256: {2}\nDescription: test\n".format(
        filename or "./{0}_{1}_amd64.deb".format(name, version), len(payload), hashlib.sha256(payload).hexdigest()
    )
    return stanza, payload


def publish(home: Path, directory: Path, indexes: dict[str, bytes]) -> None:
    lines = ["Origin: upstream", "SHA256:"]
    for path, data in indexes.items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(data)
        lines.append(" {0} {1} {2}".format(hashlib.sha256(data).hexdigest(), len(data), path))
    (directory / "Release").write_text("\n".join(lines) + "\n")
    gpg(home, "--yes", "--clearsign", "--output", str(directory / "InRelease"), str(directory / "Release"))


@pytest.fixture(name="world")
def fixture_world(tmp_path: Path) -> t.Iterator[dict]:
    upstream_home, site_home = tmp_path / "upstream-gnupg", tmp_path / "site-gnupg"
    upstream_fpr = make_key(upstream_home, "upstream <u@invalid>")
    site_fpr = make_key(site_home, "site <s@invalid>")
    key = tmp_path / "upstream.asc"
    key.write_bytes(gpg(upstream_home, "--armor", "--export"))

    # A flat repository, like the toolkit's.
    flat = tmp_path / "flat"
    flat.mkdir()
    stanzas = []
    for name, version, depends in [
        ("nvidia-container-toolkit", "1.18.0-1", "nvidia-container-toolkit-base (= 1.18.0-1), libc6"),
        ("nvidia-container-toolkit-base", "1.18.0-1", ""),
        ("nvidia-container-toolkit", "1.17.8-1", "nvidia-container-toolkit-base (= 1.17.8-1)"),
        ("nvidia-container-toolkit-base", "1.17.8-1", ""),
    ]:
        stanza, payload = deb(name, version, depends)
        stanzas.append(stanza)
        (flat / "{0}_{1}_amd64.deb".format(name, version)).write_bytes(payload)
    text = "\n".join(stanzas).encode()
    publish(upstream_home, flat, {"Packages": text, "Packages.xz": lzma.compress(text)})

    # A Debian-style archive with two components.
    archive = tmp_path / "archive"
    pool = archive / "pool"
    indexes = {}
    for component, packages in {
        "non-free": [("nvidia-smi", "550.163.01-2", "libnvidia-ml1 (= 550.163.01-2), libc6")],
        "contrib": [("libnvidia-ml1", "550.163.01-2", "")],
    }.items():
        entries = []
        for name, version, depends in packages:
            filename = "pool/{0}/{1}_{2}_amd64.deb".format(component, name, version)
            stanza, payload = deb(name, version, depends, filename)
            entries.append(stanza)
            (archive / filename).parent.mkdir(parents=True, exist_ok=True)
            (archive / filename).write_bytes(payload)
        indexes["{0}/binary-amd64/Packages.gz".format(component)] = gzip.compress("\n".join(entries).encode())
    (archive / "dists" / "trixie").mkdir(parents=True)
    publish(upstream_home, archive / "dists" / "trixie", indexes)
    assert pool.is_dir()
    yield {
        "tmp": tmp_path,
        "key": str(key),
        "upstream_fpr": upstream_fpr,
        "site_fpr": site_fpr,
        "site_home": str(site_home),
        "upstream_home": upstream_home,
        "flat": flat,
        "archive": archive,
    }
    # Key generation and signing start agents; stop them with the test.
    for home in tmp_path.glob("*gnupg"):
        subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "gpg-agent"], capture_output=True, check=False)


def flat_args(world: dict, **extra) -> dict:
    args = {
        "source": str(world["flat"]),
        "architecture": "amd64",
        "key": world["key"],
        "key_fingerprints": [world["upstream_fpr"]],
        "packages": [{"name": "nvidia-container-toolkit", "version": "1.18.0-1"}],
        "dest": str(world["tmp"] / "bundle" / "flat"),
        "signing_key": world["site_fpr"],
        "gnupg_home": world["site_home"],
    }
    args.update(extra)
    return args


def test_a_flat_repository_is_carried_published_and_signed_by_the_site(world):
    outcome = run_module("bundle_apt_repository", flat_args(world))
    assert outcome["kind"] == "exit", outcome
    result = outcome["result"]
    assert result["changed"] is True
    dest = world["tmp"] / "bundle" / "flat"
    assert sorted(p.name for p in dest.glob("*.deb")) == ["nvidia-container-toolkit-base_1.18.0-1_amd64.deb", "nvidia-container-toolkit_1.18.0-1_amd64.deb"]
    assert result["external"] == ["libc6"]
    packages = [a for a in result["artifacts"] if a["package"]]
    assert {a["package"] for a in packages} == {"nvidia-container-toolkit=1.18.0-1", "nvidia-container-toolkit-base=1.18.0-1"}
    for artifact in packages:
        assert hashlib.sha256((dest / artifact["artifact"]).read_bytes()).hexdigest() == artifact["sha256"]
        assert artifact["source"] == "{0}/{1}".format(world["flat"], artifact["artifact"])
    # The index lists exactly what was carried, and only the site key verifies it.
    assert (dest / "Packages").read_text().count("Package: ") == 2
    verified = subprocess.run(["gpg", "--batch", "--homedir", world["site_home"], "--verify", str(dest / "InRelease")], capture_output=True, check=False)
    assert verified.returncode == 0
    other = subprocess.run(["gpg", "--batch", "--homedir", str(world["upstream_home"]), "--verify", str(dest / "InRelease")], capture_output=True, check=False)
    assert other.returncode != 0
    assert result["upstream"]["signed_by"] == [world["upstream_fpr"]]

    again = run_module("bundle_apt_repository", flat_args(world))["result"]
    assert again["changed"] is False, again["diff"]
    assert again["artifacts"] == result["artifacts"]


def test_a_new_pin_replaces_the_old_packages(world):
    run_module("bundle_apt_repository", flat_args(world))
    outcome = run_module("bundle_apt_repository", flat_args(world, packages=[{"name": "nvidia-container-toolkit", "version": "1.17.8-1"}]))["result"]
    assert outcome["changed"] is True
    dest = world["tmp"] / "bundle" / "flat"
    assert sorted(p.name for p in dest.glob("*.deb")) == ["nvidia-container-toolkit-base_1.17.8-1_amd64.deb", "nvidia-container-toolkit_1.17.8-1_amd64.deb"]
    assert "1.18.0" not in (dest / "Packages").read_text()


def test_check_mode_and_plan_only_write_nothing(world):
    dest = world["tmp"] / "bundle" / "flat"
    checked = run_module("bundle_apt_repository", dict(flat_args(world), _ansible_check_mode=True))["result"]
    assert checked["changed"] is True
    assert not dest.exists()
    planned = run_module("bundle_apt_repository", flat_args(world, plan_only=True))["result"]
    assert planned["changed"] is False
    assert len(planned["artifacts"]) == 2
    assert not dest.exists()


def test_a_debian_archive_keeps_its_pool_layout_and_components(world):
    args = {
        "source": str(world["archive"]),
        "suites": ["trixie"],
        "components": ["contrib", "non-free", "non-free-firmware"],
        "architecture": "amd64",
        "key": world["key"],
        "key_fingerprints": [],
        "packages": [{"name": "nvidia-smi", "upstream_version": "550.163.01"}],
        "prefer_upstream_version": "550.163.01",
        "dest": str(world["tmp"] / "bundle" / "debian"),
        "signing_key": world["site_fpr"],
        "gnupg_home": world["site_home"],
    }
    outcome = run_module("bundle_apt_repository", args)
    # non-free-firmware is not in the upstream suite: a clear error, nothing written.
    assert outcome["kind"] == "fail"
    assert "has no non-free-firmware/binary-amd64/Packages" in outcome["result"]["msg"]
    assert not (world["tmp"] / "bundle").exists()

    args["components"] = ["contrib", "non-free"]
    result = run_module("bundle_apt_repository", args)["result"]
    dest = world["tmp"] / "bundle" / "debian"
    assert (dest / "pool/non-free/nvidia-smi_550.163.01-2_amd64.deb").is_file()
    assert (dest / "pool/contrib/libnvidia-ml1_550.163.01-2_amd64.deb").is_file()
    assert "libnvidia-ml1" in (dest / "dists/trixie/contrib/binary-amd64/Packages").read_text()
    release = (dest / "dists/trixie/Release").read_text()
    assert "Components: contrib non-free" in release and "Codename: trixie" in release
    assert result["external"] == ["libc6"]


@pytest.mark.skipif(not shutil.which("apt-get"), reason="needs apt")
def test_apt_reads_the_published_repository_with_the_site_key(world):
    run_module("bundle_apt_repository", flat_args(world))
    dest = world["tmp"] / "bundle" / "flat"
    keyring = world["tmp"] / "site.gpg"
    keyring.write_bytes(gpg(Path(world["site_home"]), "--export"))
    state = world["tmp"] / "apt"
    (state / "lists" / "partial").mkdir(parents=True)
    (state / "sources.list").write_text("deb [signed-by={0}] file:{1} /\n".format(keyring, dest))
    (state / "status").touch()
    # apt's own state in the test's directory: no root, no lock, only this source.
    settings = [
        "Dir::Etc::sourcelist={0}".format(state / "sources.list"),
        "Dir::Etc::sourceparts=-",
        "Dir::State::Lists={0}".format(state / "lists"),
        "Dir::State::status={0}".format(state / "status"),
        "Dir::Cache={0}".format(state),
        "Debug::NoLocking=true",
        "APT::Architecture=amd64",
    ]
    opts = [word for setting in settings for word in ("-o", setting)]
    update = subprocess.run(["apt-get", *opts, "update"], capture_output=True, text=True, check=False)
    assert update.returncode == 0 and "NO_PUBKEY" not in update.stderr, update.stdout + update.stderr
    shown = subprocess.run(["apt-cache", *opts, "madison", "nvidia-container-toolkit"], capture_output=True, text=True, check=True).stdout
    assert "1.18.0-1" in shown and "1.17.8-1" not in shown


def test_upstream_signatures_are_enforced(world, tmp_path):
    # A key with another fingerprint.
    outcome = run_module("bundle_apt_repository", flat_args(world, key_fingerprints=["0" * 40]))
    assert outcome["kind"] == "fail"
    assert "none of the expected" in outcome["result"]["msg"]
    # An index changed after signing (the .xz is the variant read).
    (world["flat"] / "Packages.xz").write_bytes(lzma.compress(b"Package: evil\n"))
    outcome = run_module("bundle_apt_repository", flat_args(world, source_name="bundle_upstream.x"))
    assert outcome["kind"] == "fail"
    assert outcome["result"]["msg"].startswith("bundle_upstream.x: ")
    assert "does not match the sha256 the signed InRelease lists" in outcome["result"]["msg"]
    # A Release signed by someone else.
    forger = tmp_path / "forger-gnupg"
    make_key(forger, "forger <f@invalid>")
    gpg(forger, "--yes", "--clearsign", "--output", str(world["flat"] / "InRelease"), str(world["flat"] / "Release"))
    outcome = run_module("bundle_apt_repository", flat_args(world))
    assert outcome["kind"] == "fail"
    assert "is not signed by" in outcome["result"]["msg"]
    assert not (world["tmp"] / "bundle").exists()


def test_a_package_that_does_not_match_its_index_is_refused(world):
    (world["flat"] / "nvidia-container-toolkit_1.18.0-1_amd64.deb").write_bytes(b"tampered")
    outcome = run_module("bundle_apt_repository", flat_args(world))
    assert outcome["kind"] == "fail"
    assert "is not the signed index's" in outcome["result"]["msg"]
    dest = world["tmp"] / "bundle" / "flat"
    assert not (dest / "nvidia-container-toolkit_1.18.0-1_amd64.deb").exists()
    assert not list(dest.glob("*.part"))


def test_a_missing_site_key_is_named(world):
    outcome = run_module("bundle_apt_repository", flat_args(world, signing_key="F" * 40))
    assert outcome["kind"] == "fail"
    assert "no secret key FFFF" in outcome["result"]["msg"]


def test_each_set_resolves_against_its_own_suites(world):
    """Debian 12 and 13 nodes share one archive: a trixie node must not be given bookworm's newer dependency."""
    archive = world["tmp"] / "two-suites"
    home = world["upstream_home"]
    for suite, packages in {
        "trixie": [("nvidia-smi", "550.163.01-2", "nvidia-modprobe"), ("nvidia-modprobe", "550.163.01-1", "")],
        "bookworm": [("nvidia-smi", "535.261.03-1", "nvidia-modprobe"), ("nvidia-modprobe", "570.133.07-1", "")],
    }.items():
        entries = []
        for name, version, depends in packages:
            filename = "pool/{0}/{1}_{2}_amd64.deb".format(suite, name, version)
            stanza, payload = deb(name, version, depends, filename)
            entries.append(stanza)
            (archive / filename).parent.mkdir(parents=True, exist_ok=True)
            (archive / filename).write_bytes(payload)
        (archive / "dists" / suite).mkdir(parents=True)
        publish(home, archive / "dists" / suite, {"non-free/binary-amd64/Packages": "\n".join(entries).encode()})
    args = {
        "source": str(archive),
        "suites": ["bookworm", "trixie"],
        "components": ["non-free"],
        "architecture": "amd64",
        "key": world["key"],
        "dest": str(world["tmp"] / "bundle" / "debian"),
        "signing_key": world["site_fpr"],
        "gnupg_home": world["site_home"],
        "sets": [
            {"suites": ["trixie"], "packages": [{"name": "nvidia-smi", "upstream_version": "550.163.01"}]},
            {"suites": ["bookworm"], "packages": [{"name": "nvidia-smi", "upstream_version": "535.261.03"}]},
        ],
    }
    result = run_module("bundle_apt_repository", args)["result"]
    carried = sorted(a["artifact"] for a in result["artifacts"] if a["package"])
    assert carried == [
        "pool/bookworm/nvidia-modprobe_570.133.07-1_amd64.deb",
        "pool/bookworm/nvidia-smi_535.261.03-1_amd64.deb",
        "pool/trixie/nvidia-modprobe_550.163.01-1_amd64.deb",
        "pool/trixie/nvidia-smi_550.163.01-2_amd64.deb",
    ]
    trixie = (world["tmp"] / "bundle/debian/dists/trixie/non-free/binary-amd64/Packages").read_text()
    assert "570.133.07" not in trixie and "535.261.03" not in trixie
    # One set over both suites would take the newest nvidia-modprobe for trixie's nvidia-smi too.
    union = dict(args, sets=[], packages=[{"name": "nvidia-smi", "upstream_version": "550.163.01"}], plan_only=True)
    planned = run_module("bundle_apt_repository", union)["result"]
    assert "nvidia-modprobe=570.133.07-1" in {a["package"] for a in planned["artifacts"]}
    bad = dict(args, sets=[{"suites": ["sid"], "packages": [{"name": "nvidia-smi"}]}], plan_only=True)
    assert "sets: suites ['sid'] are not among" in run_module("bundle_apt_repository", bad)["result"]["msg"]


def test_an_index_version_dpkg_refuses_is_named_not_a_traceback(world):
    """A version dpkg would refuse, met while ordering the offered versions, fails the set by name."""
    flat = world["flat"]
    stanzas = []
    for version in ("1.18.0-1", "1.18:0 beta-1"):
        stanza, payload = deb("nvidia-container-toolkit", version)
        stanzas.append(stanza)
        (flat / "nvidia-container-toolkit_{0}_amd64.deb".format(version)).write_bytes(payload)
    text = "\n".join(stanzas).encode()
    publish(world["upstream_home"], flat, {"Packages": text, "Packages.xz": lzma.compress(text)})
    outcome = run_module("bundle_apt_repository", flat_args(world, packages=[{"name": "nvidia-container-toolkit", "upstream_version": "1.18.0"}]))
    assert outcome["kind"] == "fail", outcome
    assert outcome["result"]["msg"].startswith("sets: "), outcome["result"]["msg"]
    assert "1.18:0 beta-1" in outcome["result"]["msg"]
