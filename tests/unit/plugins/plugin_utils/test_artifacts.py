"""pinned_artifacts: each pinned artifact resolved against a real HTTP source on loopback.

The sources are served by http.server from a temporary directory laid out
like the toolkit's flat apt repository, cri-tools' release downloads, the
CUDA repository, a Debian mirror and its signing keys; a mirror that is
down is a loopback port nothing listens on.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import socket
import threading
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _artifacts as art

DIGEST = "83855e114566a8a8c44c548d515670f51de3a5e1da8b2effb59870e2f10c25a3"
LAYERS_ALL = {"container_toolkit": {"managed": True}, "crictl": {"managed": True}, "mig": {"managed": False}}
FACTS = {"architecture": "x86_64", "os_family": "Debian"}
ARMOURED = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGJ...\n-----END PGP PUBLIC KEY BLOCK-----\n"
DEBIAN12 = {
    "architecture": "x86_64",
    "os_family": "Debian",
    "distribution": "Debian",
    "distribution_major_version": "12",
    "distribution_release": "bookworm",
    "distribution_version": "12.8",
}
MIG_CONFIG = {
    "version": "v1",
    "mig-configs": {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
    },
}


def packages_index(rows: t.Iterable[tuple[str, str]]) -> str:
    return "".join("Package: {0}\nVersion: {1}\nArchitecture: amd64\nFilename: ./{0}_{1}_amd64.deb\n\n".format(*row) for row in rows)


class Recorder(http.server.SimpleHTTPRequestHandler):
    """Serves the directory and counts requests, so a test can tell each source was fetched once."""

    requests: t.List[str] = []

    def do_GET(self) -> None:
        Recorder.requests.append("GET " + self.path)
        super().do_GET()

    def do_HEAD(self) -> None:
        Recorder.requests.append("HEAD " + self.path)
        super().do_HEAD()

    def log_message(self, *args: t.Any) -> None:
        pass


@pytest.fixture(scope="module")
def mirror(tmp_path_factory) -> t.Iterator[str]:
    root: Path = tmp_path_factory.mktemp("mirror")
    flat = root / "libnvidia-container" / "stable" / "deb" / "amd64"
    flat.mkdir(parents=True)
    rows = [(p, v) for v in ("1.17.8-1", "1.20.1-1", "1.9.0-1", "1.18.0~rc.1-1") for p in ("nvidia-container-toolkit-base", "nvidia-container-toolkit")]
    (flat / "Packages.gz").write_bytes(gzip.compress(packages_index(rows).encode()))
    # A repository with only the uncompressed index (the fallback).
    plain = root / "plain" / "amd64"
    plain.mkdir(parents=True)
    (plain / "Packages").write_text(packages_index([("nvidia-container-toolkit-base", "1.20.1-1")]))
    garbled = root / "garbled" / "amd64"
    garbled.mkdir(parents=True)
    (garbled / "Packages.gz").write_bytes(b"<html>a login page</html>")
    release = root / "files" / "cri-tools" / "v1.36.0"
    release.mkdir(parents=True)
    (release / "crictl-v1.36.0-linux-amd64.tar.gz").write_bytes(b"not a real tarball")
    (release / "crictl-v1.36.0-linux-amd64.tar.gz.sha256").write_text(DIGEST + "\n")
    broken = root / "files" / "cri-tools" / "v1.35.0"
    broken.mkdir(parents=True)
    (broken / "crictl-v1.35.0-linux-amd64.tar.gz.sha256").write_text("<html>not found</html>\n")
    keys = root / "keys"
    keys.mkdir()
    (keys / "mirror.asc").write_text(ARMOURED)
    # Old-format packet header of a public-key packet (tag 6, two length bytes), then a v4 key's start.
    (keys / "mirror.gpg").write_bytes(bytes([0x99, 0x01, 0x0D, 0x04]) + b"\x00" * 64)
    (keys / "login.html").write_text("<html>sign in</html>")
    (keys / "empty.asc").write_text("")
    cuda = root / "cuda" / "debian12" / "x86_64"
    cuda.mkdir(parents=True)
    (cuda / "InRelease").write_text("-----BEGIN PGP SIGNED MESSAGE-----\n")
    (cuda / "3bf863cc.pub").write_text(ARMOURED)
    # A mirror of the CUDA repository that has only Release (apt's fallback).
    released = root / "cuda-release" / "debian12" / "x86_64"
    released.mkdir(parents=True)
    (released / "Release").write_text("Origin: mirror\n")
    (released / "3bf863cc.pub").write_text(ARMOURED)
    suite = root / "debian" / "dists" / "bookworm"
    suite.mkdir(parents=True)
    (suite / "InRelease").write_text("-----BEGIN PGP SIGNED MESSAGE-----\n")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Recorder, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "http://127.0.0.1:{0}".format(server.server_address[1])
    server.shutdown()


@pytest.fixture()
def dead() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:{0}".format(probe.getsockname()[1])


def settings(url: str, **over: t.Any) -> dict[str, t.Any]:
    values = {
        "container_toolkit_version": "1.20.1",
        "container_toolkit_package_set": "full",
        "container_toolkit_operator_extensions": False,
        "container_toolkit_repo_manage": True,
        "container_toolkit_apt_repo_url": url + "/libnvidia-container/stable/deb",
        "crictl_version": "",
        "crictl_kubernetes_version": "1.36",
        "crictl_download_url": url + "/files/cri-tools",
        # The test mirror is plain HTTP on loopback.
        "crictl_allow_insecure_transport": True,
        "crictl_checksums": {},
    }
    values.update(over)
    return values


def resolve(values: dict[str, t.Any], layers: dict[str, t.Any] | None = None, **kwargs: t.Any) -> dict[str, t.Any]:
    plan = art.plan_host(values, LAYERS_ALL if layers is None else layers, FACTS, **kwargs)
    return art.ArtifactResolver().resolve({"node": plan})["node"]


def full_set(url: str) -> dict[str, t.Any]:
    # The fixture's repository has two packages of the full set; the rest come from the role's data.
    return settings(url, container_toolkit_package_set="base")


def test_versions_offered_are_resolved(mirror: str) -> None:
    result = resolve(full_set(mirror))
    assert result["errors"] == []
    assert result["resolved"] == [
        "1.20.1-1 from {0}/libnvidia-container/stable/deb/amd64".format(mirror),
        "v1.36.0 from {0}/files/cri-tools/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz".format(mirror),
    ]


def test_a_missing_toolkit_version_lists_the_offered_ones_newest_first(mirror: str) -> None:
    result = resolve(settings(mirror, container_toolkit_version="1.99.0", container_toolkit_package_set="base"))
    assert result["errors"] == [
        "container_toolkit_version 1.99.0 is not offered by the toolkit repository {0}/libnvidia-container/stable/deb/"
        "amd64 (container_toolkit_apt_repo_url): nvidia-container-toolkit-base has 1.20.1, 1.18.0~rc.1, 1.17.8, "
        "1.9.0; set container_toolkit_version to one of them".format(mirror)
    ]


def test_a_package_set_the_repository_does_not_carry_whole_is_named(mirror: str) -> None:
    result = resolve(settings(mirror))
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith("container_toolkit_package_set full needs libnvidia-container1, libnvidia-container-tools at 1.20.1-1")
    assert "libnvidia-container1 has no versions at all" in result["errors"][0]
    assert result["errors"][0].endswith("set container_toolkit_package_set: base, or mirror the whole package set")


def test_the_uncompressed_index_is_read_when_there_is_no_gzip_one(mirror: str) -> None:
    values = settings(mirror, container_toolkit_package_set="base", container_toolkit_apt_repo_url=mirror + "/plain", container_toolkit_version="1.17.8")
    assert resolve(values, {"container_toolkit": {"managed": True}})["errors"] == [
        "container_toolkit_version 1.17.8 is not offered by the toolkit repository {0}/plain/amd64 "
        "(container_toolkit_apt_repo_url): nvidia-container-toolkit-base has 1.20.1; set container_toolkit_version "
        "to one of them".format(mirror)
    ]


def test_crictl_digests_come_from_the_table_and_the_tarball_must_be_there(mirror: str) -> None:
    table = full_set(mirror)
    assert resolve(table)["errors"] == []
    missing = resolve(table | {"crictl_version": "v9.9.9"})["errors"]
    assert missing == [
        'crictl v9.9.9 on amd64 has no sha256 in the crictl role\'s table; add it as crictl_checksums: {"v9.9.9": {"amd64": "<sha256 of the tarball>"}}'
    ]
    # A digest given for a release the source lacks: the tarball itself is asked for.
    given = resolve(table | {"crictl_version": "v9.9.9", "crictl_checksums": {"v9.9.9": {"amd64": DIGEST}}})["errors"]
    assert given == [
        "crictl_version v9.9.9 is not published under crictl_download_url for amd64: its tarball "
        "{0}/files/cri-tools/v9.9.9/crictl-v9.9.9-linux-amd64.tar.gz answered HTTP 404 File not found; "
        "releases this collection knows: v1.36.0, v1.35.0, v1.34.0, v1.33.0, v1.32.0, v1.31.1, v1.30.1; set "
        "crictl_version to a published release, or to '' to take the release of crictl_kubernetes_version".format(mirror)
    ]


def test_the_old_release_checksum_source_reads_no_sha256_file(mirror: str) -> None:
    # Issue 37: crictl_checksum_source: release trusted a .sha256 from the server that serves the tarball.
    Recorder.requests.clear()
    missing = resolve(full_set(mirror) | {"crictl_version": "v1.35.0", "crictl_checksum_source": "release"}, {"crictl": {"managed": True}})
    # v1.35.0 is in the role's table; its tarball, not its .sha256 (which the mirror has), is asked for.
    assert len(missing["errors"]) == 1 and "its tarball" in missing["errors"][0], missing
    assert Recorder.requests == ["HEAD /files/cri-tools/v1.35.0/crictl-v1.35.0-linux-amd64.tar.gz"]


def test_a_crictl_mirror_without_tls_or_with_credentials_is_refused_before_any_request(mirror: str) -> None:
    Recorder.requests.clear()
    plain = resolve(full_set(mirror) | {"crictl_allow_insecure_transport": False}, {"crictl": {"managed": True}})
    assert plain["errors"] == [
        "crictl_download_url {0}/files/cri-tools is fetched over http, which does not authenticate the server; use "
        "an https:// mirror, or set crictl_allow_insecure_transport: true".format(mirror)
    ]
    secret = mirror.replace("//", "//fleet:hunter2@") + "/files/cri-tools"
    credentials = resolve(full_set(mirror) | {"crictl_download_url": secret}, {"crictl": {"managed": True}})
    assert len(credentials["errors"]) == 1 and credentials["errors"][0].startswith("crictl_download_url carries credentials")
    assert "hunter2" not in credentials["errors"][0]
    assert Recorder.requests == []


def test_an_unknown_kubernetes_minor_asks_for_an_explicit_release(mirror: str) -> None:
    errors = resolve(full_set(mirror) | {"crictl_kubernetes_version": "1.99"})["errors"]
    assert errors == [
        "crictl_kubernetes_version 1.99 has no cri-tools release this collection knows (it knows "
        "Kubernetes 1.30, 1.31, 1.32, 1.33, 1.34, 1.35, 1.36); set crictl_version to the release to "
        "install, such as v1.36.0"
    ]


def test_a_mirror_that_is_down_is_named_by_variable_and_url(mirror: str, dead: str) -> None:
    errors = resolve(settings(dead, container_toolkit_package_set="base"))["errors"]
    assert errors == [
        "container_toolkit_apt_repo_url: {0}/libnvidia-container/stable/deb/amd64/Packages.gz is unreachable "
        "(connection refused); check the mirror, or set container_toolkit_apt_repo_url to a source that "
        "answers".format(dead),
        "crictl_download_url: {0}/files/cri-tools/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz is unreachable "
        "(connection refused); check the mirror, or set crictl_download_url to a source that answers".format(dead),
    ]


def test_a_url_without_a_repository_is_not_called_unreachable(mirror: str) -> None:
    errors = resolve(settings(mirror, container_toolkit_apt_repo_url=mirror + "/nothing"), {"container_toolkit": {"managed": True}})["errors"]
    assert errors == [
        "container_toolkit_apt_repo_url: {0}/nothing/amd64/Packages is not a source this run can use: no Packages "
        "index there (HTTP 404 File not found); check that container_toolkit_apt_repo_url points at the mirror's "
        "root, or set it to one that has the artifact".format(mirror)
    ]


def test_each_source_is_fetched_once_for_a_whole_fleet(mirror: str) -> None:
    values = full_set(mirror)
    plans = {"gpu-{0:03d}".format(n): art.plan_host(values, LAYERS_ALL, FACTS) for n in range(300)}
    plans["odd-one"] = art.plan_host(values | {"container_toolkit_version": "1.99.0"}, LAYERS_ALL, FACTS)
    Recorder.requests.clear()
    result = art.ArtifactResolver().resolve(plans)
    assert sorted(Recorder.requests) == [
        "GET /libnvidia-container/stable/deb/amd64/Packages.gz",
        "HEAD /files/cri-tools/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz",
    ]
    assert sum(1 for r in result.values() if r["errors"]) == 1
    assert result["odd-one"]["errors"][0].startswith("container_toolkit_version 1.99.0 is not offered")


def test_only_the_layers_the_run_applies_are_resolved(dead: str) -> None:
    # Nothing is fetched for layers that are not managed, so a dead URL there is no error.
    plan = art.plan_host(settings(dead), {"container_toolkit": {"managed": False}, "crictl": {"managed": False}, "mig": {"managed": False}}, FACTS)
    assert plan == {"checks": [], "errors": [], "skipped": []}
    plan = art.plan_host(settings(dead, container_toolkit_repo_manage=False), LAYERS_ALL, FACTS)
    assert [c["source"]["variable"] for c in plan["checks"]] == ["crictl_download_url"]
    assert plan["skipped"][0].startswith("container_toolkit: container_toolkit_repo_manage is false")
    rpm = art.plan_host(settings(dead), LAYERS_ALL, {"architecture": "x86_64", "os_family": "RedHat"})
    assert rpm["skipped"] == ["container_toolkit: resolved against apt repositories only; RedHat nodes are checked by the toolkit layer"]


def test_mig_label_is_checked_against_its_config_with_the_mig_layers_message() -> None:
    def mig(label: str, config: t.Any = None, src: str = "", inline: t.Any = None) -> list[str]:
        layers = {"mig": {"managed": True, "vars": {"mig_label": label, "mig_config": inline or {}, "mig_config_src": src}}}
        return art.plan_host({}, layers, FACTS, mig_config=config)["errors"]

    assert mig("all-disabled", inline=MIG_CONFIG) == []
    assert mig("all-disabled", config=MIG_CONFIG, src="files/mig.yaml") == []
    assert mig("nonexistent", inline=MIG_CONFIG) == [
        "mig_label: label 'nonexistent' is not in the config; its labels are: all-1g.5gb, all-disabled "
        "(mig_config); set mig_label to one of them, or add the label to mig_config"
    ]
    assert mig("all-disabeld", config=MIG_CONFIG, src="files/mig.yaml") == [
        "mig_label: label 'all-disabeld' is not in the config (did you mean 'all-disabled'?); its labels are: "
        "all-1g.5gb, all-disabled (mig_config_src files/mig.yaml); set mig_label to one of them, or add the label "
        "to mig_config_src"
    ]
    assert mig("x", config={"version": "v2"}, src="m.yaml") == [
        "mig_label 'x': mig_config_src m.yaml is not a valid mig-parted config: config.version: 'v2' is not "
        "supported; mig-parted's format is 'v1'; fix mig_config_src m.yaml"
    ]
    assert mig("x")[0].startswith("mig_label is 'x', so set exactly one of mig_config")


def test_offered_lists_are_trimmed() -> None:
    versions = ["1.{0}.0".format(n) for n in range(20, 0, -1)]
    assert art.shown(versions) == "1.20.0, 1.19.0, 1.18.0, 1.17.0, 1.16.0, 1.15.0, 1.14.0, 1.13.0 and 12 older"
    assert art.shown([]) == "no versions at all"


def test_the_settings_read_are_the_layer_roles_own() -> None:
    """A renamed role variable or internal table must fail here, not silently resolve nothing."""
    from ansible_collections.gpufleet.nvidia.plugins.action.pinned_artifacts import SETTINGS

    for role, names in SETTINGS.items():
        assert set(names) <= set(art.role_data(role, "defaults")), role
    # The toolkit's package sets come from the knowledge base, as the role's own vars read them.
    assert "packages.TOOLKIT_PACKAGE_SETS" in (art.ROLES_DIR / "container_toolkit" / "vars" / "main.yml").read_text()
    assert {"__crictl_release_for_kubernetes", "__crictl_sha256", "__crictl_arches"} <= set(art.role_data("crictl", "vars"))


def test_an_index_that_is_not_one_is_named_not_called_unreachable(mirror: str) -> None:
    errors = resolve(settings(mirror, container_toolkit_apt_repo_url=mirror + "/garbled"), {"container_toolkit": {"managed": True}})["errors"]
    assert len(errors) == 1
    assert errors[0].startswith(
        "container_toolkit_apt_repo_url: {0}/garbled/amd64/Packages.gz is not a source this run can use: Packages.gz is not an apt Packages index (".format(
            mirror
        )
    )


# --- the driver's repository and the signing keys ----------------------------


def driver_os(facts: dict[str, t.Any], **values: t.Any) -> dict[str, t.Any]:
    """The driver role's own OS data for a node, templated as the action plugin does."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    from ansible_collections.gpufleet.nvidia.plugins.action.pinned_artifacts import trusted

    data = art.role_os_vars("driver", facts)
    templar = Templar(loader=DataLoader(), variables=dict({"ansible_facts": facts, "driver_distribution_backports": False}, **values))
    return {name: templar.template(trusted(data[name])) for name in art.DRIVER_OS_VARS if name in data}


DRIVER = {"driver": {"managed": True}}


def driver_settings(url: str, **over: t.Any) -> dict[str, t.Any]:
    values = {
        "driver_state": "present",
        "driver_source": "cuda",
        "driver_cuda_repo_url": url + "/cuda",
        "driver_cuda_repo_key_url": "",
        "driver_distribution_mirror_url": url + "/debian",
        "driver_distribution_key_url": "",
        "driver_distribution_backports": False,
    }
    values.update(over)
    return values


def resolve_driver(values: dict[str, t.Any], facts: dict[str, t.Any] | None = None, layers: dict[str, t.Any] | None = None) -> dict[str, t.Any]:
    facts = facts or DEBIAN12
    layers = layers or DRIVER
    os_data = driver_os(facts, driver_distribution_backports=values["driver_distribution_backports"])
    plan = art.plan_host(values, layers, facts, driver_os=os_data)
    return art.ArtifactResolver().resolve({"node": plan})["node"]


def test_the_driver_role_data_gives_the_repository_it_adds() -> None:
    """Read from roles/driver/vars, not copied: the CUDA path and key of Debian 12, Debian's suites."""
    debian = driver_os(DEBIAN12)
    assert debian["__driver_backend"] == "apt"
    assert debian["__driver_cuda_repo_name"] == "debian12"
    assert debian["__driver_cuda_repo_key"] == "3bf863cc.pub"
    assert debian["__driver_distribution_repo"]["suites"] == ["bookworm"]
    assert driver_os(DEBIAN12, driver_distribution_backports=True)["__driver_distribution_repo"]["suites"] == ["bookworm", "bookworm-backports"]
    ubuntu = driver_os(
        {
            "architecture": "aarch64",
            "os_family": "Debian",
            "distribution": "Ubuntu",
            "distribution_major_version": "24",
            "distribution_release": "noble",
            "distribution_version": "24.04",
        }
    )
    assert ubuntu["__driver_cuda_repo_name"] == "ubuntu2404"
    assert ubuntu["__driver_cuda_repo_arch"]["aarch64"] == "sbsa"
    assert ubuntu["__driver_distribution_repo"]["suites"] == ["noble", "noble-updates", "noble-security"]


def test_the_cuda_repository_and_its_key_are_resolved(mirror: str) -> None:
    result = resolve_driver(driver_settings(mirror))
    assert result["errors"] == []
    assert result["resolved"] == [
        "CUDA repository debian12/x86_64 from {0}/cuda/debian12/x86_64".format(mirror),
        "signing key from {0}/cuda/debian12/x86_64/3bf863cc.pub".format(mirror),
    ]
    # Release alone answers as well, as for apt.
    assert resolve_driver(driver_settings(mirror, driver_cuda_repo_url=mirror + "/cuda-release"))["errors"] == []


def test_a_cuda_repository_without_the_nodes_layout_is_named(mirror: str) -> None:
    ubuntu = dict(DEBIAN12, distribution="Ubuntu", distribution_major_version="24", distribution_release="noble", distribution_version="24.04")
    errors = resolve_driver(driver_settings(mirror), facts=ubuntu)["errors"]
    assert errors == [
        "driver_cuda_repo_url: {0}/cuda/ubuntu2404/x86_64 has no CUDA repository ubuntu2404/x86_64 (HTTP 404 for "
        "its InRelease and Release); set driver_cuda_repo_url to the root of NVIDIA's CUDA repositories or of a "
        "mirror with their layout (the driver role appends <distribution><release>/<arch>)".format(mirror),
        "driver_cuda_repo_url: {0}/cuda/ubuntu2404/x86_64/3bf863cc.pub is not a signing key this run can use: "
        "HTTP 404 File not found; set driver_cuda_repo_key_url to the URL of the repository's OpenPGP "
        "key".format(mirror),
    ]


def test_a_driver_mirror_that_is_down_is_named_by_variable_and_url(dead: str) -> None:
    assert resolve_driver(driver_settings(dead))["errors"] == [
        "driver_cuda_repo_url: {0}/cuda/debian12/x86_64/InRelease is unreachable (connection refused); check the "
        "mirror, or set driver_cuda_repo_url to a source that answers".format(dead),
        "driver_cuda_repo_url: {0}/cuda/debian12/x86_64/3bf863cc.pub is unreachable (connection refused); check "
        "the mirror, or set driver_cuda_repo_url to a source that answers".format(dead),
    ]
    errors = resolve_driver(driver_settings(dead, driver_source="distribution", driver_distribution_key_url=dead + "/keys/mirror.asc"))["errors"]
    assert errors == [
        "driver_distribution_mirror_url: {0}/debian/dists/bookworm/InRelease is unreachable (connection refused); "
        "check the mirror, or set driver_distribution_mirror_url to a source that answers".format(dead),
        "driver_distribution_key_url: {0}/keys/mirror.asc is unreachable (connection refused); check the mirror, "
        "or set driver_distribution_key_url to a source that answers".format(dead),
    ]


def test_a_suite_the_mirror_does_not_carry_is_named(mirror: str) -> None:
    values = driver_settings(mirror, driver_source="distribution", driver_distribution_backports=True, driver_distribution_key_url=mirror + "/keys/mirror.gpg")
    result = resolve_driver(values)
    assert result["errors"] == [
        "driver_distribution_mirror_url: {0}/debian has no suite bookworm-backports (HTTP 404 for "
        "dists/bookworm-backports/InRelease and Release); set driver_distribution_mirror_url to a mirror that "
        "carries bookworm-backports, or set driver_distribution_backports: false".format(mirror)
    ]
    assert result["resolved"] == ["suite bookworm from {0}/debian/dists/bookworm".format(mirror), "signing key from {0}/keys/mirror.gpg".format(mirror)]
    # Without a key URL the role uses the archive keyring on the node: nothing to fetch.
    plan = art.plan_host(driver_settings(mirror, driver_source="distribution"), DRIVER, DEBIAN12, driver_os=driver_os(DEBIAN12))
    assert [c["source"]["kind"] for c in plan["checks"]] == ["apt_suite"]


def test_key_urls_that_do_not_give_a_key_are_named(mirror: str, dead: str) -> None:
    def key_errors(url: str) -> list[str]:
        values = settings(mirror, container_toolkit_package_set="base", container_toolkit_gpg_key_url=url)
        return resolve(values, {"container_toolkit": {"managed": True}})["errors"]

    assert key_errors(mirror + "/keys/mirror.asc") == []
    assert key_errors(mirror + "/keys/mirror.gpg") == []
    assert key_errors(mirror + "/keys/missing.asc") == [
        "container_toolkit_gpg_key_url: {0}/keys/missing.asc is not a signing key this run can use: HTTP 404 File "
        "not found; set container_toolkit_gpg_key_url to the URL of the repository's OpenPGP key".format(mirror)
    ]
    assert key_errors(mirror + "/keys/login.html") == [
        "container_toolkit_gpg_key_url: {0}/keys/login.html is not a signing key this run can use: not an OpenPGP "
        "key (it starts '<html>sign in</html>'); set container_toolkit_gpg_key_url to the URL of the repository's "
        "OpenPGP key".format(mirror)
    ]
    assert key_errors(mirror + "/keys/empty.asc")[0].startswith(
        "container_toolkit_gpg_key_url: {0}/keys/empty.asc is not a signing key this run can use: not an OpenPGP key (an empty file)".format(mirror)
    )
    assert key_errors(dead + "/gpgkey") == [
        "container_toolkit_gpg_key_url: {0}/gpgkey is unreachable (connection refused); check the mirror, or set "
        "container_toolkit_gpg_key_url to a source that answers".format(dead)
    ]


def test_a_fleet_sharing_a_mirror_asks_each_url_once(mirror: str) -> None:
    """300 nodes, toolkit and driver from one mirror with one key: one request per distinct URL."""
    values = dict(
        full_set(mirror),
        container_toolkit_gpg_key_url=mirror + "/keys/mirror.asc",
        **driver_settings(mirror, driver_source="distribution", driver_distribution_key_url=mirror + "/keys/mirror.asc"),
    )
    layers = dict(LAYERS_ALL, **DRIVER)
    os_data = driver_os(DEBIAN12)
    plans = {"gpu-{0:03d}".format(n): art.plan_host(values, layers, DEBIAN12, driver_os=os_data) for n in range(300)}
    cuda = dict(values, driver_source="cuda")
    plans.update({"cuda-{0}".format(n): art.plan_host(cuda, layers, DEBIAN12, driver_os=os_data) for n in range(50)})
    Recorder.requests.clear()
    result = art.ArtifactResolver().resolve(plans)
    assert sorted(Recorder.requests) == [
        "GET /cuda/debian12/x86_64/3bf863cc.pub",
        "GET /cuda/debian12/x86_64/InRelease",
        "GET /debian/dists/bookworm/InRelease",
        "GET /keys/mirror.asc",
        "GET /libnvidia-container/stable/deb/amd64/Packages.gz",
        "HEAD /files/cri-tools/v1.36.0/crictl-v1.36.0-linux-amd64.tar.gz",
    ]
    assert all(not r["errors"] for r in result.values())


def test_an_unmanaged_or_absent_driver_fetches_nothing(dead: str) -> None:
    values = driver_settings(dead, driver_distribution_key_url=dead + "/k.asc")
    assert art.plan_host(values, {"driver": {"managed": False}}, DEBIAN12, driver_os=driver_os(DEBIAN12)) == {"checks": [], "errors": [], "skipped": []}
    absent = art.plan_host(dict(values, driver_state="absent"), DRIVER, DEBIAN12, driver_os=driver_os(DEBIAN12))
    assert absent == {"checks": [], "errors": [], "skipped": ["driver: driver_state is absent, so no repository is added"]}
    # The toolkit's key is the toolkit layer's: not fetched when the layer is not applied or keeps its own sources.
    toolkit = settings(dead, container_toolkit_gpg_key_url=dead + "/gpgkey")
    assert art.plan_host(toolkit, {"container_toolkit": {"managed": False}}, FACTS)["checks"] == []
    kept = art.plan_host(dict(toolkit, container_toolkit_repo_manage=False), {"container_toolkit": {"managed": True}}, FACTS)
    assert kept["checks"] == []
