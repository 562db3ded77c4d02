"""container_runtime against real containerd 1.6/1.7/2.2/2.3 and Docker 26.

Expectations come from the scenario's fixtures and inventory, and the
effective configuration is read from the engines themselves (crictl info,
containerd config dump, docker info), never only from the files we wrote.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib

import pytest

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "_shared"))

# pylint: disable=wrong-import-position
from stack import host_vars, node, run_role, sha256

FILES = os.path.join(HERE, "..", "files")
MAIN = "/etc/containerd/config.toml"
DROP_IN = "/etc/containerd/conf.d/99-nvidia.toml"
DAEMON_JSON = "/etc/docker/daemon.json"
IMPORT_LINE = 'imports = ["{0}"]\n'.format(DROP_IN)
FIXTURES = {
    "container_runtime-debian12": "containerd-v2-other-tool.toml",
    "container_runtime-containerd22": "containerd-v3-other-tool.toml",
}
CDI_DIRS = ["/etc/cdi", "/var/run/cdi"]


def name(host) -> str:
    return host.backend.host


def engine(host) -> str:
    return host_vars(host).get("container_runtime_engine", "containerd")


def containerd_only(host):
    if engine(host) != "containerd":
        pytest.skip("not a containerd node")


def crictl_info(host) -> dict:
    return json.loads(node(host).check_output("crictl info"))["config"]


def config_dump(host) -> dict:
    return tomllib.loads(node(host).check_output("containerd config dump"))


def fixture(filename: str) -> str:
    with open(os.path.join(FILES, filename), encoding="utf-8") as handle:
        return handle.read()


def with_import(text: str) -> str:
    """`text` as the role must leave it: one imports line after `version`, nothing else."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("version"))
    return "".join(lines[: at + 1] + [IMPORT_LINE] + lines[at + 1 :])


def expected_runtimes(host) -> dict[str, str]:
    hv = host_vars(host)
    runtimes = {"nvidia": "/usr/bin/nvidia-container-runtime"}
    if hv.get("container_runtime_cdi_runtime"):
        runtimes["nvidia-cdi"] = "/usr/bin/nvidia-container-runtime.cdi"
    return runtimes


def cdi_expected(host) -> bool:
    # containerd 1.6 (Debian 12) has no CDI at all.
    return name(host) != "container_runtime-debian12"


# --- containerd ------------------------------------------------------------------------------


def test_running_cri_plugin_serves_the_nvidia_runtimes(host):
    containerd_only(host)
    info = crictl_info(host)
    runtimes = info["containerd"]["runtimes"]
    for runtime, binary in expected_runtimes(host).items():
        assert runtimes[runtime]["runtimeType"] == "io.containerd.runc.v2"
        assert runtimes[runtime]["options"]["BinaryName"] == binary
    assert "runc" in runtimes, "the built-in runc runtime must survive the drop-in"
    default = "nvidia" if host_vars(host).get("container_runtime_set_default") else "runc"
    assert info["containerd"]["defaultRuntimeName"] == default


def test_cdi_is_on_where_containerd_has_it(host):
    containerd_only(host)
    info = crictl_info(host)
    if cdi_expected(host):
        assert info["enableCDI"] is True
        assert info["cdiSpecDirs"] == CDI_DIRS
    else:
        assert "enableCDI" not in info


def test_main_config_is_the_other_tools_file_plus_one_import(host):
    containerd_only(host)
    current = node(host).file(MAIN).content_string
    if name(host) in FIXTURES:
        assert current == with_import(fixture(FIXTURES[name(host)]))
    elif name(host) == "container_runtime-containerd23":
        # No config existed: the role created the smallest one that imports ours.
        assert current == "version = 4\n" + IMPORT_LINE
    else:
        assert current.count(DROP_IN) == 1
        assert IMPORT_LINE in current


def test_effective_config_keeps_the_other_tools_settings(host):
    containerd_only(host)
    dump = config_dump(host)
    plugins = dump["plugins"]
    if name(host) == "container_runtime-debian12":
        cri = plugins["io.containerd.grpc.v1.cri"]
        assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10"
        assert cri["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://mirror.gpufleet.invalid"]
        runtimes = cri["containerd"]["runtimes"]
        assert runtimes["sandboxed"]["options"]["BinaryName"] == "/usr/local/bin/runsc-shim"
        # The nvidia runtime takes runc's cgroup driver.
        assert runtimes["runc"]["options"]["SystemdCgroup"] is True
        assert runtimes["nvidia"]["options"]["SystemdCgroup"] is True
        assert dump["oom_score"] == -999
    elif name(host) == "container_runtime-containerd22":
        assert plugins["io.containerd.cri.v1.images"]["registry"]["config_path"] == "/etc/containerd/certs.d"
        assert plugins["io.containerd.cri.v1.images"]["snapshotter"] == "native"
        runtimes = plugins["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
        assert runtimes["sandboxed"]["options"]["BinaryName"] == "/usr/local/bin/runsc-shim"
        assert dump["required_plugins"] == ["io.containerd.grpc.v1.cri"]


def test_drop_in_uses_the_config_version_of_the_containerd(host):
    containerd_only(host)
    drop_in = tomllib.loads(node(host).file(DROP_IN).content_string)
    version, plugin = {
        "container_runtime-debian12": (2, "io.containerd.grpc.v1.cri"),
        "container_runtime-debian13": (2, "io.containerd.grpc.v1.cri"),
        "container_runtime-containerd22": (3, "io.containerd.cri.v1.runtime"),
        "container_runtime-containerd23": (4, "io.containerd.cri.v1.runtime"),
    }[name(host)]
    assert drop_in["version"] == version
    assert set(drop_in["plugins"]) == {plugin}
    assert set(expected_runtimes(host)) <= set(drop_in["plugins"][plugin]["containerd"]["runtimes"])
    f = node(host).file(DROP_IN)
    assert (f.user, f.group, f.mode) == ("root", "root", 0o600)


def test_plugin_settings_reach_the_running_cri_plugin(host):
    settings = host_vars(host).get("container_runtime_containerd_plugin_settings")
    if not settings:
        pytest.skip("no plugin settings on this node")
    # containerd names this one in snake case in its JSON too.
    assert crictl_info(host)["device_ownership_from_security_context"] is True


def test_retemplated_main_config_gets_only_our_import_back(host):
    """Another tool rewrites config.toml (as kubespray does on every run)."""
    if name(host) != "container_runtime-debian13":
        pytest.skip("exercised on the containerd 1.7 node")
    retemplated = fixture(FIXTURES["container_runtime-debian12"]).replace("mirror.gpufleet.invalid", "mirror2.gpufleet.invalid")
    node(host).run_expect([0], "printf %%s %s > %s", retemplated, MAIN)
    run = run_role(host, "container_runtime")
    assert not run.failed, run
    assert node(host).file(MAIN).content_string == with_import(retemplated)
    info = crictl_info(host)
    assert info["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://mirror2.gpufleet.invalid"]
    assert "nvidia" in info["containerd"]["runtimes"]
    assert info["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True


def _main_pid(host) -> str:
    return node(host).check_output("systemctl show --property=MainPID --value containerd")


def test_config_containerd_refuses_is_rolled_back_before_any_restart(host):
    if name(host) != "container_runtime-debian12":
        pytest.skip("exercised on the containerd 1.6 node")
    before = {path: sha256(host, path) for path in (MAIN, DROP_IN)}
    pid = _main_pid(host)
    run = run_role(host, "container_runtime", {"container_runtime_containerd_plugin_settings": {"enable_selinux": "definitely-not-a-bool"}})
    assert run.failed, run
    assert "containerd refused the new configuration" in run.output, run
    assert {path: sha256(host, path) for path in before} == before
    assert _main_pid(host) == pid, "containerd must not have been restarted"


def test_the_nvidia_runtime_as_default_without_its_binary_is_refused_before_any_change(host):
    """As the default runtime, a missing binary would fail every container the engine starts."""
    if name(host) != "container_runtime-containerd23":
        pytest.skip("exercised on the containerd 2.3 node (nvidia is its default)")
    before = {path: sha256(host, path) for path in (MAIN, DROP_IN)}
    run = run_role(host, "container_runtime", {"container_runtime_nvidia_runtime_path": "/usr/local/bin/no-such-nvidia-runtime"})
    assert run.failed, run
    assert "container_runtime_set_default: /usr/local/bin/no-such-nvidia-runtime does not exist" in run.output, run
    assert {path: sha256(host, path) for path in before} == before


@pytest.mark.parametrize("which", ["container_runtime-debian12", "container_runtime-containerd22"])
def test_containerd_that_fails_with_the_new_drop_in_is_rolled_back(host, which):
    """1.6 keeps running without CRI; 2.2 (CRI required) exits. Both end healthy, as before."""
    if name(host) != which:
        pytest.skip("exercised on " + which)
    before = {path: sha256(host, path) for path in (MAIN, DROP_IN)}
    run = run_role(host, "container_runtime", {"container_runtime_containerd_plugin_settings": {"containerd": {"default_runtime_name": "gpufleet-missing"}}})
    assert run.failed, run
    assert "did not come back healthy" in run.output, run
    assert "is running with them again" in run.output, run
    assert {path: sha256(host, path) for path in before} == before
    assert node(host).service("containerd").is_running
    assert "nvidia" in crictl_info(host)["containerd"]["runtimes"]


# --- Docker ------------------------------------------------------------------------------------


def test_daemon_json_keeps_every_other_key(host):
    if engine(host) != "docker":
        pytest.skip("not a Docker node")
    original = json.loads(fixture("daemon.json"))
    current = json.loads(node(host).file(DAEMON_JSON).content_string)
    for key, value in original.items():
        assert current[key] == value, key
    assert current["runtimes"] == {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}
    assert current["default-runtime"] == "nvidia"
    assert current["features"] == {"cdi": True}
    assert current["cdi-spec-dirs"] == CDI_DIRS
    assert set(current) == set(original) | {"runtimes", "default-runtime", "features", "cdi-spec-dirs"}
    node(host).run_expect([0], "dockerd --validate --config-file %s", DAEMON_JSON)


def test_running_docker_serves_the_runtime_with_cdi(host):
    if engine(host) != "docker":
        pytest.skip("not a Docker node")
    info = json.loads(node(host).check_output("docker info --format '{{json .}}'"))
    # docker info answers for the client alone when the daemon does not: say why.
    assert not info.get("ServerErrors"), (info["ServerErrors"], node(host).run("systemctl status --no-pager --lines=20 docker containerd").stdout)
    assert info["Runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert info["DefaultRuntime"] == "nvidia"
    assert info["CDISpecDirs"] == CDI_DIRS
