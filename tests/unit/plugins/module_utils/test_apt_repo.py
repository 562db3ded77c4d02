"""_apt_repo: Packages/Release parsing, dpkg version order, relations and the closure of a pinned set."""

from __future__ import annotations

import gzip
import lzma
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _apt_repo as apt

# Trimmed from Debian trixie's non-free/contrib indexes (550.163.01), plus a
# second revision and an older version to choose between.
NON_FREE = """Package: nvidia-kernel-dkms
Version: 550.163.01-2
Architecture: amd64
Depends: nvidia-kernel-support (= 550.163.01-2), dkms (>= 3.0.11), nvidia-modprobe (>= 550)
Provides: nvidia-kernel-550.163.01
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-kernel-dkms_550.163.01-2_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000aa
Description: NVIDIA binary kernel module DKMS source
 This package builds the NVIDIA binary kernel modules.

Package: nvidia-kernel-dkms
Version: 535.216.03-1
Architecture: amd64
Depends: nvidia-kernel-support (= 535.216.03-1), dkms
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-kernel-dkms_535.216.03-1_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000ab

Package: nvidia-kernel-support
Version: 550.163.01-2
Architecture: amd64
Pre-Depends: nvidia-legacy-check (>= 396)
Depends: nvidia-alternative--kmod-alias | nvidia-alternative (= 550.163.01-2), libc6 (>= 2.34) [amd64]
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-kernel-support_550.163.01-2_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000ac

Package: nvidia-kernel-support
Version: 535.216.03-1
Architecture: amd64
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-kernel-support_535.216.03-1_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000ad

Package: nvidia-alternative
Version: 550.163.01-2
Architecture: amd64
Provides: nvidia-alternative--kmod-alias (= 550.163.01)
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-alternative_550.163.01-2_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000ae

Package: nvidia-legacy-check
Version: 550.163.01-2
Architecture: amd64
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-legacy-check_550.163.01-2_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000af

Package: nvidia-smi
Version: 550.163.01-2
Architecture: amd64
Depends: libnvidia-ml1 (= 550.163.01-2) | libnvidia-ml1:any (>= 999)
Filename: pool/non-free/n/nvidia-graphics-drivers/nvidia-smi_550.163.01-2_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000b0

Package: libnvidia-ml1
Version: 550.163.01-2
Architecture: amd64
Filename: pool/non-free/n/nvidia-graphics-drivers/libnvidia-ml1_550.163.01-2_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000b1

Package: libnvidia-ml1
Version: 550.163.01-1
Architecture: amd64
Filename: pool/non-free/n/nvidia-graphics-drivers/libnvidia-ml1_550.163.01-1_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000b2
"""

CONTRIB = """Package: nvidia-modprobe
Version: 570.133.07-1
Architecture: amd64
Filename: pool/contrib/n/nvidia-modprobe/nvidia-modprobe_570.133.07-1_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000c0

Package: nvidia-modprobe
Version: 550.163.01-1
Architecture: amd64
Filename: pool/contrib/n/nvidia-modprobe/nvidia-modprobe_550.163.01-1_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000c1

Package: nvidia-persistenced
Version: 550.163.01-1
Architecture: amd64
Depends: libc6 (>= 2.34), adduser
Filename: pool/contrib/n/nvidia-persistenced/nvidia-persistenced_550.163.01-1_amd64.deb
Size: 10
SHA256: 00000000000000000000000000000000000000000000000000000000000000c2
"""


def index() -> apt.Index:
    built = apt.Index()
    built.add(("trixie", "non-free"), apt.parse_deb822(NON_FREE))
    built.add(("trixie", "contrib"), apt.parse_deb822(CONTRIB))
    return built


# --- versions ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "lower,higher",
    [
        ("535.216.03-2~bpo12+1", "535.216.03-2"),
        ("535.216.03-2", "535.261.03-1"),
        ("535.54.03-1", "535.216.03-1"),
        ("1.0~rc1", "1.0"),
        ("1.0", "1.0+dfsg"),
        ("1.0-1", "1:0.1-1"),
        ("1.0a", "1.0b"),
        ("1.0", "1.0.1"),
        ("2.34", "2.36-9"),
    ],
)
def test_dpkg_version_order(lower, higher):
    assert apt.compare_versions(lower, higher) < 0
    assert apt.compare_versions(higher, lower) > 0
    assert apt.compare_versions(lower, lower) == 0


def test_dpkg_agrees_where_it_is_installed():
    if not shutil.which("dpkg"):
        pytest.skip("no dpkg here")
    pairs = [("550.163.01-2", "550.163.01-10"), ("1.2~b", "1.2~a"), ("0:1.0", "1.0"), ("1.0-0", "1.0"), ("7.6p2-4", "7.6-0"), ("1.18.0-1", "1.18.0~rc.1-1")]
    for a, b in pairs:
        for op, ours in (("lt", apt.compare_versions(a, b) < 0), ("eq", apt.compare_versions(a, b) == 0)):
            theirs = subprocess.run(["dpkg", "--compare-versions", a, op, b], check=False).returncode == 0
            assert ours == theirs, (a, op, b)


def test_upstream_version_and_relations():
    assert apt.upstream_version("1:550.163.01-2") == "550.163.01"
    assert apt.upstream_version("20240109+1") == "20240109+1"
    assert apt.parse_relations("a (>= 1.0), b | c:any (<< 2) [amd64], d <!nocheck>") == [
        [("a", ">=", "1.0")],
        [("b", None, None), ("c", "<<", "2")],
        [("d", None, None)],
    ]
    with pytest.raises(apt.IndexError_):
        apt.parse_relations("a (>= 1.0, b")
    assert apt.satisfies("550.163.01-2", "=", "550.163.01-2")
    assert not apt.satisfies("550.163.01-2", ">>", "550.163.01-2")
    assert apt.satisfies("550.163.01-2", ">", "550.163.01-2")  # the obsolete > means >=


# --- files ------------------------------------------------------------------------


def test_stanzas_round_trip_verbatim():
    stanzas = apt.parse_deb822(NON_FREE)
    assert len(stanzas) == 9
    assert stanzas[0].get("description").endswith("This package builds the NVIDIA binary kernel modules.")
    again = apt.parse_deb822(apt.render_packages(stanzas))
    assert [s.fields for s in again] == [s.fields for s in stanzas]


def test_a_broken_index_is_refused():
    with pytest.raises(apt.IndexError_, match="line 1: a continuation line"):
        apt.parse_deb822(" orphan\n")
    with pytest.raises(apt.IndexError_, match="not a 'Field: value' line"):
        apt.parse_deb822("Package nvidia\n")


RELEASE = """Origin: Debian
Suite: stable
Codename: trixie
SHA256:
 bd1e0e1d5c9b6b1a7df21ea3a9b1d7bfa57b39b1bd0f7d1e6e0e8d6c2d0d9e3a   123456 non-free/binary-amd64/Packages
 0d1e0e1d5c9b6b1a7df21ea3a9b1d7bfa57b39b1bd0f7d1e6e0e8d6c2d0d9e3b    23456 non-free/binary-amd64/Packages.xz
 1d1e0e1d5c9b6b1a7df21ea3a9b1d7bfa57b39b1bd0f7d1e6e0e8d6c2d0d9e3c    33456 ./Packages.gz
"""


def test_release_lists_and_the_preferred_index():
    release = apt.parse_release(RELEASE)
    assert release["Codename"] == "trixie"
    assert apt.pick_index(release["files"], "non-free/binary-amd64/Packages") == (
        "non-free/binary-amd64/Packages.xz",
        "0d1e0e1d5c9b6b1a7df21ea3a9b1d7bfa57b39b1bd0f7d1e6e0e8d6c2d0d9e3b",
        23456,
    )
    assert apt.pick_index(release["files"], "Packages")[0] == "Packages.gz"
    assert apt.pick_index(release["files"], "contrib/binary-amd64/Packages") is None
    with pytest.raises(apt.IndexError_, match="no SHA256"):
        apt.parse_release("Origin: x\nMD5Sum:\n 00 1 Packages\n")


def test_decompress_each_variant():
    assert apt.decompress("Packages.xz", lzma.compress(b"Package: a\n")) == "Package: a\n"
    assert apt.decompress("Packages.gz", gzip.compress(b"Package: a\n")) == "Package: a\n"
    assert apt.decompress("Packages", b"Package: a\n") == "Package: a\n"


@pytest.mark.parametrize("filename", ["../etc/passwd", "/etc/passwd", "pool/../../x.deb", "", ".", "a\\b.deb"])
def test_filenames_that_leave_the_repository_are_refused(filename):
    with pytest.raises(apt.IndexError_, match="leaves the repository"):
        apt.safe_filename(filename)


def test_filenames_inside_are_normalised():
    assert apt.safe_filename("./nvidia-container-toolkit_1.18.0-1_amd64.deb") == "nvidia-container-toolkit_1.18.0-1_amd64.deb"
    assert apt.safe_filename("pool/non-free/n/x.deb") == "pool/non-free/n/x.deb"


def test_release_is_rendered_over_the_indexes_and_compared_without_its_date():
    files = {"non-free/binary-amd64/Packages": b"Package: a\n", "non-free/binary-amd64/Packages.gz": apt.gzip_bytes("x")}
    text = apt.render_release({"Origin": "gpufleet-bundle", "Date": "Sun, 22 Nov 2026 18:00:00 UTC", "Suite": ""}, files)
    parsed = apt.parse_release(text)
    assert parsed["files"]["non-free/binary-amd64/Packages"] == (apt.sha256(b"Package: a\n"), 11)
    assert "Suite" not in parsed
    later = text.replace("18:00:00", "19:00:00")
    assert apt.release_without_date(later) == apt.release_without_date(text)
    assert apt.gzip_bytes("same") == apt.gzip_bytes("same")


# --- the closure ------------------------------------------------------------------


def names(result: apt.Closure) -> list[str]:
    return ["{0}={1}".format(s.package, s.version) for _w, s in result.selected]


def test_the_closure_follows_dependencies_the_index_satisfies():
    result = apt.closure(
        index(), [apt.Request("nvidia-kernel-dkms", upstream_version="550.163.01"), apt.Request("nvidia-smi", upstream_version="550.163.01")], "550.163.01"
    )
    assert names(result) == [
        "libnvidia-ml1=550.163.01-2",  # the exact = relation, not the -1 revision
        "nvidia-alternative=550.163.01-2",  # through its versioned Provides
        "nvidia-kernel-dkms=550.163.01-2",
        "nvidia-kernel-support=550.163.01-2",
        "nvidia-legacy-check=550.163.01-2",  # Pre-Depends count
        "nvidia-modprobe=550.163.01-1",  # the driver's version is preferred over the newest
        "nvidia-smi=550.163.01-2",
    ]
    assert result.external == ["dkms (>= 3.0.11)", "libc6 (>= 2.34)"]
    assert result.missing == []
    assert {w for w, _s in result.selected} == {("trixie", "non-free"), ("trixie", "contrib")}


def test_without_a_preference_the_newest_candidate_wins():
    result = apt.closure(index(), [apt.Request("nvidia-kernel-dkms", upstream_version="550.163.01")])
    assert "nvidia-modprobe=570.133.07-1" in names(result)


def test_requests_by_exact_or_any_version():
    assert names(apt.closure(index(), [apt.Request("libnvidia-ml1", version="550.163.01-1")])) == ["libnvidia-ml1=550.163.01-1"]
    assert names(apt.closure(index(), [apt.Request("libnvidia-ml1")])) == ["libnvidia-ml1=550.163.01-2"]
    result = apt.closure(index(), [apt.Request("nvidia-persistenced")])
    assert names(result) == ["nvidia-persistenced=550.163.01-1"]
    assert result.external == ["adduser", "libc6 (>= 2.34)"]


def test_a_version_the_index_lacks_is_missing_with_what_it_offers():
    result = apt.closure(
        index(),
        [
            apt.Request("nvidia-kernel-dkms", upstream_version="550.999.99"),
            apt.Request("nvidia-driver-pinning-550.163.01", required=False),
            apt.Request("no-such-package"),
        ],
    )
    assert result.missing == ["nvidia-kernel-dkms 550.999.99 (offered: 550.163.01-2, 535.216.03-1)", "no-such-package (offered: none)"]
    assert result.selected == []


def test_an_unversioned_provides_does_not_satisfy_a_versioned_relation():
    built = apt.Index()
    built.add(
        "flat",
        apt.parse_deb822(
            "Package: a\nVersion: 1\nDepends: virt (>= 2)\nFilename: a.deb\nSHA256: 00\n\nPackage: b\nVersion: 1\nProvides: virt\nFilename: b.deb\nSHA256: 00\n"
        ),
    )
    result = apt.closure(built, [apt.Request("a")])
    assert names(result) == ["a=1"]
    assert result.external == ["virt (>= 2)"]
