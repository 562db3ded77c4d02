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
    base = dict(
        config_version=2,
        plugin_merge=c.MERGE_REPLACE,
        runtimes=[NVIDIA],
        default_runtime=None,
        enable_cdi=None,
        cdi_spec_dirs=["/etc/cdi", "/var/run/cdi"],
        plugin_settings={},
    )
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


# The rules of containerd's LoadConfig/resolveImports, one test each (see the comment in _containerd.py).


def _names(chain: list, root: Path) -> list:
    return [str(Path(f.path).relative_to(root)) for f in chain]


def test_rule1_breadth_first_each_files_imports_go_to_the_end_of_the_queue(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'version = 2\nimports = ["a.toml", "b.toml"]\n')
    write(tmp_path / "a.toml", 'imports = ["c.toml"]\n')
    write(tmp_path / "b.toml", 'imports = ["d.toml"]\n')
    write(tmp_path / "c.toml", "")
    write(tmp_path / "d.toml", "")
    assert _names(c.load_chain(main, skip=""), tmp_path) == ["config.toml", "a.toml", "b.toml", "c.toml", "d.toml"]


def test_rule2_relative_entries_are_relative_to_the_importing_file(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["conf.d/./a.toml"]\n')
    # a.toml's relative entries start in conf.d/, not next to the main file.
    write(tmp_path / "conf.d" / "a.toml", 'imports = ["sub/b.toml", "../top.toml"]\n')
    write(tmp_path / "conf.d" / "sub" / "b.toml", "")
    write(tmp_path / "sub" / "b.toml", "x = 'the wrong one'\n")
    write(tmp_path / "top.toml", "")
    chain = c.load_chain(main, skip="")
    assert [f.path for f in chain] == [main, str(tmp_path / "conf.d" / "a.toml"), str(tmp_path / "conf.d" / "sub" / "b.toml"), str(tmp_path / "top.toml")]


def test_rule3_globs_match_dot_files_in_byte_order(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["conf.d/*.toml"]\n')
    for name in ["b.toml", ".hidden.toml", "B.toml", "10-x.toml", "9-x.toml", "é.toml", "a.toml~"]:
        write(tmp_path / "conf.d" / name, "")
    assert _names(c.load_chain(main, skip=""), tmp_path) == [
        "config.toml",
        "conf.d/.hidden.toml",
        "conf.d/10-x.toml",
        "conf.d/9-x.toml",
        "conf.d/B.toml",
        "conf.d/b.toml",
        "conf.d/é.toml",
    ]


def test_rule3_wildcard_directories_expand_directory_by_directory(tmp_path: Path) -> None:
    # Sorting whole paths would put x-y/ before x/ ('-' < '/'); Glob lists x's matches first.
    main = write(tmp_path / "config.toml", 'imports = ["*/conf.d/*.toml"]\n')
    for directory in ["x-y", "x", ".d"]:
        write(tmp_path / directory / "conf.d" / "a.toml", "")
    assert _names(c.load_chain(main, skip=""), tmp_path) == ["config.toml", ".d/conf.d/a.toml", "x/conf.d/a.toml", "x-y/conf.d/a.toml"]


def test_rule3_only_entries_with_a_star_are_patterns(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["[ab].toml", "?.toml", "c[.]*", "none/*.toml"]\n')
    write(tmp_path / "[ab].toml", "")  # a literal name: no '*' in its entry
    write(tmp_path / "?.toml", "")
    write(tmp_path / "a.toml", "")  # would match [ab].toml as a pattern, but is not loaded
    write(tmp_path / "c.toml", "")  # c[.]* is a pattern: Go's classes and ranges apply
    assert _names(c.load_chain(main, skip=""), tmp_path) == ["config.toml", "[ab].toml", "?.toml", "c.toml"]


@pytest.mark.parametrize("entry", ["conf.d/[*.toml", "conf.d/*[", "conf.d/[]*.toml", "conf.d/*\\\\"])
def test_rule3_a_malformed_pattern_is_an_error(tmp_path: Path, entry: str) -> None:
    write(tmp_path / "conf.d" / "a.toml", "")
    main = write(tmp_path / "config.toml", 'imports = ["{0}"]\n'.format(entry))
    with pytest.raises(c.ContainerdConfigError, match="not a valid pattern"):
        c.load_chain(main, skip="")


def test_rule3_a_matched_directory_is_an_error(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["conf.d/*"]\n')
    write(tmp_path / "conf.d" / "a.toml", "")
    (tmp_path / "conf.d" / "old").mkdir()
    with pytest.raises(c.ContainerdConfigError, match="conf.d/old is a directory"):
        c.load_chain(main, skip="")


def test_rule4_each_path_loads_once_at_its_first_place(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["a.toml", "b.toml", "conf.d/../a.toml"]\n')
    write(tmp_path / "a.toml", 'imports = ["config.toml", "b.toml"]\n')  # a cycle back to main
    write(tmp_path / "b.toml", 'imports = ["a.toml"]\n')
    assert _names(c.load_chain(main, skip=""), tmp_path) == ["config.toml", "a.toml", "b.toml"]


def test_rule4_a_glob_that_matches_the_skipped_drop_in_skips_it(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["conf.d/*.toml"]\n')
    ours = write(tmp_path / "conf.d" / "99-nvidia.toml", "")
    write(tmp_path / "conf.d" / "10-other.toml", "")
    chain = c.load_chain(main, skip=ours.replace("/conf.d/", "//conf.d/"))  # compared as Go cleans it
    assert _names(chain, tmp_path) == ["config.toml", "conf.d/10-other.toml"]


def test_rule5_a_missing_file_reached_by_a_nested_import_is_an_error(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["a.toml"]\n')
    write(tmp_path / "a.toml", 'imports = ["gone.toml"]\n')
    with pytest.raises(c.ContainerdConfigError, match="gone.toml is imported but does not exist"):
        c.load_chain(main, skip="")


def test_rule6_version_1_files_have_their_imports_followed(tmp_path: Path) -> None:
    main = write(tmp_path / "config.toml", 'imports = ["a.toml"]\n[plugins.cri]\n')  # no version: 1
    write(tmp_path / "a.toml", "version = 2\n")
    assert _names(c.load_chain(main, skip=""), tmp_path) == ["config.toml", "a.toml"]


@pytest.mark.parametrize("imports", ['"conf.d/a.toml"', "[1]", "{a = 1}"])
def test_imports_that_is_not_an_array_of_strings_is_an_error(tmp_path: Path, imports: str) -> None:
    main = write(tmp_path / "config.toml", "imports = {0}\n".format(imports))
    with pytest.raises(c.ContainerdConfigError, match="'imports' must be an array of file paths"):
        c.load_chain(main, skip="")


@pytest.mark.parametrize(
    "imports, covered",
    [
        (["/etc/containerd/conf.d/99-nvidia.toml"], True),
        (["/etc/containerd/conf.d/*.toml"], True),
        (["conf.d/*.toml"], True),
        # containerd globs only entries with a '*' (then with Go's ? and [] too).
        (["/etc/containerd/conf.d/?9-nvidia.toml"], False),
        (["/etc/containerd/conf.d/?9-*.toml"], True),
        (["/etc/containerd/*.toml"], False),  # * never crosses a /
        (["/etc/containerd/conf.d/[0-8]*.toml"], False),
        (["/etc/containerd/conf.d/[^0-8]*.toml"], True),  # Go negates with ^ ...
        (["/etc/containerd/conf.d/[!0-8]*.toml"], False),  # ... and ! is just a character
        (["/etc/containerd/conf.d/9\\9-*.toml"], True),  # \ escapes
        (["/etc/containerd//conf.d/../conf.d/*.toml"], True),  # cleaned first
        (["/etc/*/conf.d/*"], True),
        (["/*/conf.d/*"], False),  # a * matches one path element
        (["/etc/*/*/*"], True),
        ([], False),
    ],
)
def test_import_covers_uses_gos_glob_rules(imports: list, covered: bool) -> None:
    assert c.import_covers("/etc/containerd/config.toml", imports, "/etc/containerd/conf.d/99-nvidia.toml") is covered


# --- merging ----------------------------------------------------------------------------------


def _files(*texts: str) -> list[c.LoadedFile]:
    return [c.LoadedFile("f{0}".format(i), tomllib.loads(t)) for i, t in enumerate(texts)]


def test_containerd_1x_replaces_a_plugins_whole_table() -> None:
    merged = c.merge(
        _files(
            'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nsandbox_image = "a"\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/x"\n',
            'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n',
        ),
        c.MERGE_REPLACE,
    )
    assert merged["plugins"]["io.containerd.grpc.v1.cri"] == {"enable_cdi": True}


def test_containerd_2x_merges_key_by_key_and_moves_v2_cri_settings() -> None:
    merged = c.merge(
        _files(
            'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]\nSystemdCgroup = true\n',
            'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = true\n',
            'version = 3\nimports = ["/x"]\n[plugins."io.containerd.cri.v1.runtime"]\nenable_cdi = false\n',
        ),
        c.MERGE_DEEP,
    )
    runtime = merged["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is True
    # containerd's merge never overrides with a zero value (mergo WithOverride).
    assert runtime["enable_cdi"] is True
    assert merged["imports"] == ["/x"]


# --- the drop-in ------------------------------------------------------------------------------

OTHER_TOOL_V2 = """
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
"""


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
    data = c.drop_in_data(merged, spec(config_version=config_version, plugin_merge=c.MERGE_DEEP, default_runtime="nvidia", enable_cdi=True), defaults(version))
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
    merged = c.merge(_files('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\nenable_selinux = true\n'), c.MERGE_REPLACE)
    cri = c.drop_in_data(merged, spec(plugin_settings={"enable_selinux": False, "containerd": {"x": 1}}), None)["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_selinux"] is False
    assert cri["containerd"]["x"] == 1


@pytest.mark.parametrize(
    "fixture, version, binary",
    [
        ("dump-1.6.20-with-nvidia.toml", 2, "/usr/bin/nvidia-container-runtime"),
        ("dump-2.3.7-with-nvidia.toml", 4, "/usr/bin/nvidia-container-runtime"),
    ],
)
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


# --- the sandbox image --------------------------------------------------------------------------

PAUSE = "registry.test/pause:3.10@sha256:" + "a" * 64


@pytest.mark.parametrize("version", [2, 3, 4])
def test_the_sandbox_image_goes_where_each_config_version_reads_it(version: int) -> None:
    data = c.drop_in_data({}, spec(config_version=version, sandbox_image=PAUSE, plugin_merge=c.MERGE_REPLACE if version == 2 else c.MERGE_DEEP))
    if version == 2:
        assert data["plugins"][c.CRI_V2]["sandbox_image"] == PAUSE
        assert c.CRI_IMAGES_V3 not in data["plugins"]
    else:
        assert data["plugins"][c.CRI_IMAGES_V3] == {"pinned_images": {"sandbox": PAUSE}}
        assert "sandbox_image" not in data["plugins"][c.CRI_RUNTIME_V3]


def test_no_sandbox_image_leaves_the_other_files_setting() -> None:
    merged = {"plugins": {c.CRI_V2: {"sandbox_image": "site/pause:1"}}}
    assert c.drop_in_data(merged, spec())["plugins"][c.CRI_V2]["sandbox_image"] == "site/pause:1"
    assert c.CRI_IMAGES_V3 not in c.drop_in_data({}, spec(config_version=3, plugin_merge=c.MERGE_DEEP))["plugins"]
