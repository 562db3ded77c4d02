# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""_containerd: load order and merging as containerd does them, and the drop-in built from them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _containerd as c

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "containerd"
NVIDIA = ("nvidia", "/usr/bin/nvidia-container-runtime")


def spec(**kw) -> c.DropInSpec:
    base = dict(config_version=2, plugin_merge=c.MERGE_REPLACE, runtimes=[NVIDIA], default_runtime=None,
                enable_cdi=None, cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"], plugin_settings={})
    base.update(kw)
    return c.DropInSpec(**base)


def defaults(version: str) -> dict:
    return tomllib.loads((FIXTURES / "default-{0}.toml".format(version)).read_text())


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


# --- loading ----------------------------------------------------------------------------------

def test_chain_follows_imports_breadth_first_and_skips_our_drop_in(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'version = 2\nimports = ["conf.d/*.toml", "/nowhere/ours.toml"]\n')
    write(tmp_path / "conf.d" / "20-b.toml", "version = 2\n")
    write(tmp_path / "conf.d" / "10-a.toml", 'version = 2\nimports = ["../extra.toml"]\n')
    write(tmp_path / "extra.toml", "version = 2\n")
    chain = c.load_chain(main, skip="/nowhere/ours.toml")
    assert [Path(f.path).name for f in chain] == ["config.toml", "10-a.toml", "20-b.toml", "extra.toml"]


def test_missing_main_config_means_defaults_and_a_missing_import_is_an_error(tmp_path: Path) -> None:
    assert c.load_chain(str(tmp_path / "absent.toml"), skip="") == []
    main = write(tmp_path / "config.toml", 'version = 2\nimports = ["/nowhere/else.toml"]\n')
    with pytest.raises(c.ContainerdConfigError, match="imported but does not exist"):
        c.load_chain(main, skip="")


def test_invalid_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", "version = \n")
    with pytest.raises(c.ContainerdConfigError, match="config.toml is not valid TOML"):
        c.load_chain(main, skip="")


@pytest.mark.parametrize("imports, covered", [
    (["/etc/containerd/conf.d/99-nvidia.toml"], True),
    (["/etc/containerd/conf.d/*.toml"], True),
    (["conf.d/*.toml"], True),
    # containerd globs only entries with a '*' (then with Go's ? and [] too).
    (["/etc/containerd/conf.d/?9-nvidia.toml"], False),
    (["/etc/containerd/conf.d/?9-*.toml"], True),
    (["/etc/containerd/*.toml"], False),  # * never crosses a /
    (["/etc/containerd/conf.d/[0-8]*.toml"], False),
    ([], False),
])
def test_import_covers_uses_gos_glob_rules(imports: list, covered: bool) -> None:
    assert c.import_covers("/etc/containerd/config.toml", imports, "/etc/containerd/conf.d/99-nvidia.toml") is covered


# --- merging ----------------------------------------------------------------------------------

def _files(*texts: str) -> list[c.LoadedFile]:
    return [c.LoadedFile("f{0}".format(i), tomllib.loads(t)) for i, t in enumerate(texts)]


def test_containerd_1x_replaces_a_plugins_whole_table() -> None:
    merged = c.merge(_files(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "a"\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/x"\n',
        'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n',
    ), c.MERGE_REPLACE)
    assert merged["plugins"]["io.containerd.grpc.v1.cri"] == {"enable_cdi": True}


def test_containerd_2x_merges_key_by_key_and_moves_v2_cri_settings() -> None:
    merged = c.merge(_files(
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\nSystemdCgroup = true\n',
        'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = true\n',
        'version = 3\nimports = ["/x"]\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = false\n',
    ), c.MERGE_DEEP)
    runtime = merged["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    # containerd's merge never overrides with a zero value (mergo WithOverride).
    assert runtime["enable_cdi"] is True
    assert merged["imports"] == ["/x"]


# --- the drop-in ------------------------------------------------------------------------------

OTHER_TOOL_V2 = '''
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
    runtime_type = "io.containerd.kata.v2"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.example"]
'''


def test_1x_drop_in_repeats_the_cri_table_and_copies_runcs_options() -> None:
    merged = c.merge(_files(OTHER_TOOL_V2), c.MERGE_REPLACE)
    data = c.drop_in_data(merged, spec(enable_cdi=True), defaults("1.7.24"))
    cri = data["plugins"]["io.containerd.grpc.v1.cri"]
    assert data["version"] == 2
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10"
    assert cri["registry"]["mirrors"]["docker.io"]["endpoint"] == ["https://mirror.example"]
    assert cri["containerd"]["runtimes"]["kata"] == {"runtime_type": "io.containerd.kata.v2"}
    assert cri["containerd"]["runtimes"]["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2",
        "options": {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"},
    }
    assert (cri["enable_cdi"], cri["cdi_spec_dirs"]) == (True, ["/etc/cdi", "/var/run/cdi"])


@pytest.mark.parametrize("version", ["1.6.20", "1.7.24"])
def test_1x_drop_in_keeps_the_built_in_runc_that_a_runtimes_table_would_replace(version: str) -> None:
    data = c.drop_in_data({}, spec(), defaults(version))
    runtimes = data["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
    builtin = defaults(version)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]["runc"]
    # The built-in entry without its zero values: 1.7 also sets sandbox_mode.
    assert runtimes["runc"]["runtime_type"] == "io.containerd.runc.v2"
    assert all(builtin[key] == value for key, value in runtimes["runc"].items() if key != "options")
    assert runtimes["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime"}


@pytest.mark.parametrize("version, config_version", [("2.2.9", 3), ("2.3.7", 4)])
def test_2x_drop_in_holds_only_its_own_settings(version: str, config_version: int) -> None:
    merged = c.merge(_files(OTHER_TOOL_V2), c.MERGE_DEEP)
    data = c.drop_in_data(merged, spec(config_version=config_version, plugin_merge=c.MERGE_DEEP,
                                       default_runtime="nvidia", enable_cdi=True), defaults(version))
    assert data["version"] == config_version
    runtime = data["plugins"]["io.containerd.cri.v1.runtime"]
    assert set(runtime["containerd"]["runtimes"]) == {"nvidia"}
    assert runtime["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True
    assert runtime["containerd"]["default_runtime_name"] == "nvidia"
    assert "sandbox_image" not in runtime and "registry" not in runtime


def test_a_non_runc_default_runtime_is_not_copied() -> None:
    kata_default = '\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  default_runtime_name = "kata"\n'
    merged = c.merge(_files(OTHER_TOOL_V2 + kata_default), c.MERGE_REPLACE)
    cri = c.drop_in_data(merged, spec(), None)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["SystemdCgroup"] is True  # from runc


def test_plugin_settings_win_even_with_false() -> None:
    merged = c.merge(_files('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_selinux = true\n'),
                     c.MERGE_REPLACE)
    cri = c.drop_in_data(merged, spec(plugin_settings={"enable_selinux": False, "containerd": {"x": 1}}),
                         None)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_selinux"] is False
    assert cri["containerd"]["x"] == 1


@pytest.mark.parametrize("fixture, version, binary", [
    ("dump-1.6.20-with-nvidia.toml", 2, "/usr/bin/nvidia-container-runtime"),
    ("dump-2.3.7-with-nvidia.toml", 4, "/usr/bin/nvidia-container-runtime"),
])
def test_effective_view_reads_real_config_dumps(fixture: str, version: int, binary: str) -> None:
    view = c.effective_view(tomllib.loads((FIXTURES / fixture).read_text()))
    assert view["config_version"] == version
    assert view["runtimes"]["nvidia"] == {"runtime_type": "io.containerd.runc.v2", "binary": binary}
    assert "runc" in view["runtimes"]
    assert view["address"] == "/run/containerd/containerd.sock"


def test_redact_hides_registry_credentials() -> None:
    text = 'auth = "c2VjcmV0"\n  password = "p"\nidentitytoken="t"\nendpoint = ["x"]\n'
    out = c.redact(text)
    assert "c2VjcmV0" not in out and '"p"' not in out and '"t"' not in out
    assert 'endpoint = ["x"]' in out


def test_preamble_is_the_top_level_part_only() -> None:
    text = 'version = 2 # two\nimports = [\n  "/a",\n]\n\n[plugins]\nsecret = 1\n'
    assert c.preamble(text) == 'version = 2 # two\nimports = [\n  "/a",\n]\n'
