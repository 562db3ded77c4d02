# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_files: a role's own files in one call - changed then not, check mode, diff, order and mismatches."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd
import stat
import typing as t
from pathlib import Path

import pytest

from ansible_collections.gpufleet.nvidia.tests.unit.playbook_run import local_play
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result

ROOT = Path(__file__).resolve().parents[4]
ME = {"owner": pwd.getpwuid(os.getuid()).pw_name, "group": grp.getgrgid(os.getgid()).gr_name}


def declared(root: Path) -> list[dict[str, t.Any]]:
    """A boot unit as the mig and verify roles install one."""
    return [
        {"path": str(root / "lib"), "state": "directory", **ME},
        {"path": str(root / "lib" / "code.py"), "content": "print('hello')\n", "mode": "0644", **ME},
        {"path": str(root / "sbin-command"), "content": "#!/bin/sh\nexit 0\n", "mode": "0755", **ME},
        {"path": str(root / "unit.service"), "content": "[Unit]\nDescription=x\n", **ME},
        {"path": str(root / "unit-link"), "state": "link", "src": str(root / "unit.service")},
    ]


def run(files: list[dict[str, t.Any]], check: bool = False, diff: bool = False) -> dict[str, t.Any]:
    return module_result("node_files", {"files": files}, check=check, diff=diff)


def mode(path: Path) -> str:
    return "{0:04o}".format(stat.S_IMODE(os.lstat(path).st_mode))


def test_first_run_creates_in_order_second_run_changes_nothing(tmp_path: Path) -> None:
    first = run(declared(tmp_path))
    assert first["changed"] and first["changed_paths"] == [entry["path"] for entry in declared(tmp_path)]
    assert (tmp_path / "lib" / "code.py").read_text() == "print('hello')\n"
    assert mode(tmp_path / "lib") == "0755" and mode(tmp_path / "lib" / "code.py") == "0644"
    assert mode(tmp_path / "sbin-command") == "0755" and mode(tmp_path / "unit.service") == "0644"
    assert os.readlink(tmp_path / "unit-link") == str(tmp_path / "unit.service")
    assert not list(tmp_path.glob(".gpufleet-*")) and not list((tmp_path / "lib").glob(".gpufleet-*"))
    second = run(declared(tmp_path))
    assert not second["changed"] and second["changed_paths"] == []


def test_an_empty_owner_and_group_leave_them_as_they_are(tmp_path: Path) -> None:
    """What the verify role's reports on the controller ask for: the user running the playbook keeps them."""
    report = tmp_path / "reports" / "host.json"
    report.parent.mkdir()
    report.write_text("{}\n")
    os.chown(report, 12345, 23456)
    entries = [
        {"path": str(report.parent), "state": "directory", "owner": "", "group": ""},
        {"path": str(report), "content": "{}\n", "mode": "0644", "owner": "", "group": ""},
        {"path": str(tmp_path / "reports" / "new.json"), "content": "{}\n", "owner": "", "group": ""},
    ]
    result = run(entries)
    assert not result["failed"], result["msg"]
    assert result["changed_paths"] == [str(tmp_path / "reports" / "new.json")]
    assert (os.stat(report).st_uid, os.stat(report).st_gid) == (12345, 23456)
    assert os.stat(tmp_path / "reports" / "new.json").st_uid == os.getuid()


def test_check_mode_predicts_every_change_and_writes_nothing(tmp_path: Path) -> None:
    predicted = run(declared(tmp_path), check=True, diff=True)
    assert predicted["changed_paths"] == [entry["path"] for entry in declared(tmp_path)]
    assert list(tmp_path.iterdir()) == []
    run(declared(tmp_path))
    (tmp_path / "unit.service").write_text("edited\n")
    (tmp_path / "sbin-command").chmod(0o700)
    predicted = run(declared(tmp_path), check=True)
    assert predicted["changed_paths"] == [str(tmp_path / "sbin-command"), str(tmp_path / "unit.service")]
    assert (tmp_path / "unit.service").read_text() == "edited\n" and mode(tmp_path / "sbin-command") == "0700"


def test_diff_shows_content_and_mode_changes(tmp_path: Path) -> None:
    run(declared(tmp_path))
    (tmp_path / "unit.service").write_text("edited\n")
    (tmp_path / "sbin-command").chmod(0o700)
    result = run(declared(tmp_path), diff=True)
    content = [d for d in result["diff"] if d.get("before_header") == str(tmp_path / "unit.service")]
    assert content == [
        {
            "before_header": str(tmp_path / "unit.service"),
            "after_header": str(tmp_path / "unit.service"),
            "before": "edited\n",
            "after": "[Unit]\nDescription=x\n",
        }
    ]
    modes = [d for d in result["diff"] if d.get("before", {}) and isinstance(d["before"], dict) and d["before"].get("path") == str(tmp_path / "sbin-command")]
    assert modes[0]["before"]["mode"] == "0700" and modes[0]["after"]["mode"] == "0755"
    assert (tmp_path / "unit.service").read_text() == "[Unit]\nDescription=x\n"


def test_a_replaced_file_keeps_no_temporary_and_a_wrong_link_is_repointed(tmp_path: Path) -> None:
    run(declared(tmp_path))
    (tmp_path / "unit-link").unlink()
    (tmp_path / "unit-link").symlink_to("/elsewhere")
    result = run(declared(tmp_path))
    assert result["changed_paths"] == [str(tmp_path / "unit-link")]
    assert os.readlink(tmp_path / "unit-link") == str(tmp_path / "unit.service")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib", "sbin-command", "unit-link", "unit.service"]


def test_absent_removes_files_links_and_directories_and_then_changes_nothing(tmp_path: Path) -> None:
    run(declared(tmp_path))
    gone = [{"path": entry["path"], "state": "absent"} for entry in reversed(declared(tmp_path))]
    predicted = run(gone, check=True)
    assert len(predicted["changed_paths"]) == 5 and (tmp_path / "lib" / "code.py").exists()
    removed = run(gone)
    assert removed["changed"] and list(tmp_path.iterdir()) == []
    assert not run(gone)["changed"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"path": "relative/file", "content": "x"}, "files[0].path: 'relative/file' is not absolute"),
        ({"path": "/tmp/x", "state": "file"}, "files[0].content: required with state=file"),
        ({"path": "/tmp/x", "state": "link"}, "files[0].src: required with state=link"),
    ],
)
def test_bad_entries_name_the_field(entry: dict[str, t.Any], message: str) -> None:
    result = run([entry])
    assert result["failed"] and message in result["msg"]


def test_a_path_of_another_kind_is_an_error_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "unit.service").mkdir()
    result = run(declared(tmp_path))
    assert result["failed"] and "is a directory, declared a file" in result["msg"]
    assert (tmp_path / "unit.service").is_dir()
    assert result["changed_paths"] == [str(tmp_path / "lib"), str(tmp_path / "lib" / "code.py"), str(tmp_path / "sbin-command")]


def test_a_file_whose_directory_is_missing_says_to_declare_it(tmp_path: Path) -> None:
    result = run([{"path": str(tmp_path / "nowhere" / "file"), "content": "x", **ME}])
    assert result["failed"] and "declare it first" in result["msg"]


# -- what a diff and the output may show --------------------------------------------------------------------------
def test_a_file_over_the_cap_or_binary_diffs_as_its_sizes_and_sha256(tmp_path: Path) -> None:
    big, small = tmp_path / "big.json", tmp_path / "small.conf"
    big.write_text("old\n" * 40)
    small.write_bytes(b"\x00\x01binary")
    files = [{"path": str(big), "content": "new\n" * 40, **ME}, {"path": str(small), "content": "text\n", **ME}]
    result = module_result("node_files", {"files": files, "diff_max_bytes": 100}, diff=True)
    assert result["changed_paths"] == [str(big), str(small)]
    assert result["diff"] == [
        {
            "before_header": str(big),
            "after_header": str(big),
            "dst_larger": 100,
            "src_larger": 100,
            "before": "(160 bytes, sha256 {0})\n".format(hashlib.sha256(b"old\n" * 40).hexdigest()),
            "after": "(160 bytes, sha256 {0})\n".format(hashlib.sha256(b"new\n" * 40).hexdigest()),
        },
        {
            "before_header": str(small),
            "after_header": str(small),
            "dst_binary": 1,
            "before": "(8 bytes, sha256 {0})\n".format(hashlib.sha256(b"\x00\x01binary").hexdigest()),
            "after": "(5 bytes, sha256 {0})\n".format(hashlib.sha256(b"text\n").hexdigest()),
        },
    ]
    assert big.read_text() == "new\n" * 40 and small.read_text() == "text\n"


def test_a_new_file_at_the_cap_diffs_as_text_and_zero_shows_no_text(tmp_path: Path) -> None:
    path = str(tmp_path / "new.conf")
    exact = module_result("node_files", {"files": [{"path": path, "content": "12345\n", **ME}], "diff_max_bytes": 6}, check=True, diff=True)
    assert exact["diff"] == [{"before_header": path, "after_header": path, "before": "", "after": "12345\n"}]
    none = module_result("node_files", {"files": [{"path": path, "content": "12345\n", **ME}], "diff_max_bytes": 0}, check=True, diff=True)
    assert none["diff"][0]["before"] == "(absent)\n" and none["diff"][0]["src_larger"] == 0
    assert "12345" not in str(none)
    negative = module_result("node_files", {"files": [{"path": path, "content": "x", **ME}], "diff_max_bytes": -1})
    assert negative["failed"] and "diff_max_bytes: -1 is negative" in negative["msg"]


PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - gpufleet.nvidia.node_files:
        files:
          - {{path: "{root}/small.conf", content: "{small}\\n", owner: {owner}, group: {group}}}
          - {{path: "{root}/big.conf", content: "{big}", owner: {owner}, group: {group}}}
        diff_max_bytes: 4096
"""


def playbook(tmp_path: Path, small: str, big: str, *options: str, play_text: str = PLAY, rc: int = 0) -> str:
    """ansible-playbook's whole output for PLAY, run on this machine with `options`."""
    play = tmp_path / "play.yml"
    play.write_text(play_text.format(root=tmp_path, small=small, big=big, **ME))
    # ansible-core 2.21 leaves a result's `invocation` (the arguments as the
    # module saw them) out unless asked: ask, so that the arguments are
    # printed and their masking is tested on every core.
    return local_play(play, *options, rc=rc, env={"ANSIBLE_INJECT_INVOCATION": "1"})


def test_content_is_never_printed_and_a_diff_is_capped(tmp_path: Path) -> None:
    secret, huge = "small-secret-4f1c", "big-secret-9a2e " * 400
    verbose = playbook(tmp_path, secret, huge, "-vvv")
    assert "changed: [localhost]" in verbose and "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in verbose
    assert (tmp_path / "small.conf").read_text() == secret + "\n" and (tmp_path / "big.conf").read_text() == huge
    assert "secret" not in verbose, verbose
    # Under --diff the small file's new text shows in its diff; the big file's text nowhere.
    changed_small, changed_huge = "small-secret-77b0", "big-secret-c3d1 " * 400
    diffed = playbook(tmp_path, changed_small, changed_huge, "-vvv", "--diff")
    assert "-" + secret in diffed and "+" + changed_small in diffed, diffed
    assert "big-secret" not in diffed, diffed
    assert "diff skipped: source file size is greater than 4096" in diffed
    assert "(6400 bytes, sha256 {0})".format(hashlib.sha256(changed_huge.encode()).hexdigest()) in diffed
    # Only the diff shows it (printed, and as the result's diff at -vvv): not the arguments the result echoes.
    for text, sign, side in ((changed_small, "+", "after"), (secret, "-", "before")):
        assert diffed.count(text) == diffed.count(sign + text) + diffed.count('"{0}": "{1}'.format(side, text)), diffed


def test_content_is_hidden_where_the_arguments_are_refused(tmp_path: Path) -> None:
    # Refused by the argument spec, before the module's own code runs: only no_log hides the content there.
    bad = PLAY.replace("diff_max_bytes: 4096", "diff_max_bytes: many")
    output = playbook(tmp_path, "refused-secret-5d2a", "", "-vvv", play_text=bad, rc=2)
    assert "diff_max_bytes" in output and "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in output, output
    assert "refused-secret" not in output, output


@pytest.fixture
def systemd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A unit directory, a booted-with-systemd marker and a systemctl that logs its arguments, under tmp_path."""
    from ansible_collections.gpufleet.nvidia.plugins.modules import node_files

    units, booted, bin_dir = tmp_path / "units", tmp_path / "run-systemd-system", tmp_path / "bin"
    for directory in (units, booted, bin_dir):
        directory.mkdir()
    calls = tmp_path / "systemctl.log"
    systemctl = bin_dir / "systemctl"
    systemctl.write_text('#!/bin/sh\necho "$@" >>{0}\nexit "${{SYSTEMCTL_RC:-0}}"\n'.format(calls))
    systemctl.chmod(0o755)
    monkeypatch.setattr(node_files, "_UNIT_DIRECTORIES", (str(units) + "/",))
    monkeypatch.setattr(node_files, "_SYSTEMD_BOOTED", str(booted))
    monkeypatch.setenv("PATH", "{0}:{1}".format(bin_dir, os.environ["PATH"]))
    return {"units": units, "booted": booted, "calls": calls}


def reload_run(files: list[dict[str, t.Any]], check: bool = False) -> dict[str, t.Any]:
    return module_result("node_files", {"files": files, "systemd_reload": True}, check=check)


def test_systemd_reload_follows_a_changed_unit_once_and_only_then(tmp_path: Path, systemd: dict[str, Path]) -> None:
    """The mig and node_labels roles write their unit and its link and let systemd read them in the same call."""
    unit = {"path": str(systemd["units"] / "example.service"), "content": "[Unit]\nDescription=x\n", **ME}
    link = {"path": str(systemd["units"] / "multi-user.target.wants"), "state": "directory", **ME}
    other = {"path": str(tmp_path / "config.json"), "content": "{}\n", **ME}

    predicted = reload_run([unit, link, other], check=True)
    assert predicted["systemd_reloaded"] and not systemd["calls"].exists()
    first = reload_run([unit, link, other])
    assert first["systemd_reloaded"] and systemd["calls"].read_text() == "daemon-reload\n"
    again = reload_run([unit, link, other])
    assert not again["changed"] and not again["systemd_reloaded"]
    # A change outside the unit directories needs no reload.
    changed_config = reload_run([unit, link, dict(other, content='{"a": 1}\n')])
    assert changed_config["changed_paths"] == [other["path"]] and not changed_config["systemd_reloaded"]
    # A removed unit is a change systemd must forget.
    removed = reload_run([dict(unit, state="absent", content=None)])
    assert removed["systemd_reloaded"] and systemd["calls"].read_text() == "daemon-reload\n" * 2
    # Without the option, a changed unit is left to the caller.
    assert not run([unit])["systemd_reloaded"] and systemd["calls"].read_text() == "daemon-reload\n" * 2


def test_systemd_reload_is_skipped_where_systemd_is_not_running(tmp_path: Path, systemd: dict[str, Path]) -> None:
    """An image built in a chroot: systemd reads the units when it starts."""
    systemd["booted"].rmdir()
    written = reload_run([{"path": str(systemd["units"] / "example.service"), "content": "[Unit]\n", **ME}])
    assert written["changed"] and not written["systemd_reloaded"] and not systemd["calls"].exists()


def test_a_failing_systemd_reload_fails_and_names_what_was_written(tmp_path: Path, systemd: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYSTEMCTL_RC", "1")
    unit = str(systemd["units"] / "example.service")
    failed = reload_run([{"path": unit, "content": "[Unit]\n", **ME}])
    assert failed["failed"] and failed["msg"].startswith("systemctl daemon-reload failed after the files were written")
    assert failed["changed_paths"] == [unit] and Path(unit).read_text() == "[Unit]\n"
