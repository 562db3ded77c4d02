# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_reads_info: files and real commands read by name in one call; what is missing is said, not raised."""

from __future__ import annotations

import json
import os
import pty
import select
import stat
import subprocess
import sys
import time
import tty
import typing as t
from pathlib import Path
from unittest import mock

from ansible_collections.gpufleet.nvidia.plugins.modules import node_reads_info
from ansible_collections.gpufleet.nvidia.tests.unit.plugins.module_runner import module_result


def run(check: bool = False, **args: t.Any) -> dict[str, t.Any]:
    return module_result("node_reads_info", args, check=check)


def program(directory: Path, name: str, body: str) -> str:
    """A stand-in for one of the probes' programs: a Python script under the program's own name."""
    path = directory / name
    path.write_text("#!{0}\nimport sys, time\n{1}\n".format(sys.executable, body))
    path.chmod(0o755)
    return str(path)


def test_reads_files_and_commands_by_name(tmp_path: Path) -> None:
    (tmp_path / "version").write_bytes(b"NVRM version: 550.163.01\n\xff\n")
    containerd = program(tmp_path, "containerd", "print('containerd ' + sys.argv[1]); sys.exit(3)")
    crictl = program(tmp_path, "crictl", "sys.stderr.write('broken')")
    result = run(
        check=True,
        files={"version": str(tmp_path / "version"), "spec": str(tmp_path / "missing.yaml")},
        commands={
            "version": [containerd, "--version"],
            "stderr": [crictl, "--config", "/etc/crictl.yaml", "info"],
            "absent": [str(tmp_path / "not-installed" / "crio"), "--version"],
        },
    )
    assert not result["changed"]
    assert result["files"] == {"version": "NVRM version: 550.163.01\n\ufffd\n", "spec": None}
    assert result["file_errors"] == {}
    assert result["commands"]["version"] == {"rc": 3, "stdout": "containerd --version\n", "stderr": ""}
    assert result["commands"]["stderr"] == {"rc": 0, "stdout": "", "stderr": "broken"}
    assert result["commands"]["absent"] == {"rc": 127, "stdout": "", "stderr": "{0} is not installed".format(tmp_path / "not-installed" / "crio")}


def test_unreadable_files_say_why_and_output_is_bounded(tmp_path: Path) -> None:
    (tmp_path / "big").write_text("x" * 100)
    dpkg_query = program(tmp_path, "dpkg-query", "print('y' * 100)")
    result = run(files={"dir": str(tmp_path), "big": str(tmp_path / "big")}, commands={"many": [dpkg_query, "-W"]}, max_bytes=10)
    assert result["files"] == {"dir": None, "big": "x" * 10}
    assert result["file_errors"]["dir"].startswith(str(tmp_path) + ": ")
    assert result["commands"]["many"]["stdout"] == "y" * 10


def test_a_command_past_its_time_is_stopped(tmp_path: Path) -> None:
    slow = program(tmp_path, "systemctl", "print('started', flush=True); time.sleep(30)")
    result = run(commands={"slow": [slow, "show", "containerd"]}, timeout=1)
    assert result["commands"]["slow"]["rc"] == 124
    assert result["commands"]["slow"]["stdout"] == "started\n"
    assert "did not finish within 1 s" in result["commands"]["slow"]["stderr"]


def test_a_command_that_is_no_probe_is_refused_before_any_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    containerd = program(tmp_path, "containerd", "open({0!r}, 'w').close()".format(str(marker)))
    refused = run(commands={"version": [containerd, "--version"], "restart": ["systemctl", "restart", "containerd"]})
    assert refused["failed"]
    assert refused["msg"].startswith("commands.restart: systemctl restart containerd is none of node_reads_info's read-only probes (")
    assert "_read_probes.py" in refused["msg"]
    assert not marker.exists()  # the probe before it did not run either


def test_bad_arguments_name_the_field() -> None:
    assert run(files={"spec": "relative/path"})["msg"].startswith("files.spec:")
    assert run(commands={"engine": "containerd config dump"})["msg"].startswith("commands.engine:")
    assert run(commands={"engine": []})["msg"].startswith("commands.engine:")
    nothing = run()
    assert (nothing["files"], nothing["file_errors"], nothing["commands"]) == ({}, {}, {})


def test_a_fifo_gives_what_it_holds_without_waiting_for_more(tmp_path: Path) -> None:
    # A writer keeps the FIFO open, so a blocking read would wait for ever:
    # the non-blocking read ends at EAGAIN with what was written.
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer open without blocking
    writer = os.open(fifo, os.O_WRONLY)
    try:
        os.write(writer, b"6,1,100,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n")
        os.write(writer, b"4,2,200,-;NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n")
        started = time.monotonic()
        result = run(files={"kmsg": str(fifo)})
        assert time.monotonic() - started < 10
    finally:
        os.close(writer)
        os.close(reader)
    assert result["files"]["kmsg"] == (
        "6,1,100,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module\n4,2,200,-;NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n"
    )
    assert result["file_errors"] == {}


def test_a_character_device_is_read_until_it_would_block() -> None:
    # A pty's slave side is a character device (as /dev/kmsg is) that blocks
    # once its input is read.
    controller, terminal = pty.openpty()
    try:
        tty.setraw(terminal)
        os.write(controller, b"4,7,300,-;NVRM: GPU 0000:07:00.0: GPU has fallen off the bus.\n")
        path = os.ttyname(terminal)
        assert stat.S_ISCHR(os.stat(path).st_mode)
        deadline = time.monotonic() + 5
        while not select.select([terminal], [], [], 0.1)[0] and time.monotonic() < deadline:
            pass
        result = run(files={"kmsg": path})
    finally:
        os.close(controller)
        os.close(terminal)
    assert result["files"]["kmsg"] == "4,7,300,-;NVRM: GPU 0000:07:00.0: GPU has fallen off the bus.\n"


def test_an_overwritten_kmsg_record_is_skipped_and_every_read_takes_a_whole_record() -> None:
    # /dev/kmsg's own behaviour, which no test host lets us provoke: EPIPE for
    # a record overwritten meanwhile, EINVAL for a buffer shorter than the
    # record, EAGAIN at the end of the buffer.
    records = [
        b"6,1,1,-;first\n",
        BrokenPipeError(32, "Broken pipe"),
        b"6,9,9,-;after the overwrite\n",
        BlockingIOError(11, "Resource temporarily unavailable"),
    ]
    sizes = []

    def fake_read(descriptor: int, size: int) -> bytes:
        sizes.append(size)
        item = records.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    with mock.patch.object(node_reads_info.os, "read", fake_read):
        data = node_reads_info.read_available(3, 4096)
    assert data == b"6,1,1,-;first\n6,9,9,-;after the overwrite\n"
    assert min(sizes) > 8192
    assert records == []


def test_an_endless_device_is_bounded_by_max_bytes() -> None:
    assert run(files={"zero": "/dev/zero"}, max_bytes=100)["files"]["zero"] == "\0" * 100


# --- kernel logs: parsed on the node, the newest end of a file ----------------------------------------------------------
XID = "Nov 29 10:00:{0:02d} gpu-01 kernel: NVRM: Xid (PCI:0000:{1:02x}:00): 79, pid=1234, GPU has fallen off the bus.\n"


def test_a_kernel_log_travels_as_its_events_only(tmp_path: t.Any) -> None:
    log = tmp_path / "kern.log"
    log.write_text("Nov 29 09:59:59 gpu-01 kernel: usb 1-1: new device\n" + XID.format(1, 7))
    result = module_result("node_reads_info", {"kernel_logs": {"kernel_log": str(log)}})
    found = result["kernel_logs"]["kernel_log"]
    assert [(e["xid"], e["bus_id"], e["fallen_off_bus"]) for e in found["events"]] == [(79, "00000000:07:00.0", True)]
    assert not found["truncated"] and "usb" not in json.dumps(result)
    assert module_result("node_reads_info", {"kernel_logs": {"kernel_log": str(tmp_path / "gone")}})["kernel_logs"] == {"kernel_log": None}


def test_a_large_log_file_is_read_from_its_newest_end(tmp_path: t.Any) -> None:
    """The oldest bytes are the ones left out: an Xid at the end of a log larger than max_bytes is found."""
    log = tmp_path / "kern.log"
    noise = "Nov 29 09:00:00 gpu-01 kernel: audit: type=1400 something long enough to fill the log quickly\n" * 2000
    log.write_text(XID.format(0, 3) + noise + XID.format(5, 0x41))
    found = module_result("node_reads_info", {"kernel_logs": {"kernel_log": str(log)}, "max_bytes": 64 * 1024})["kernel_logs"]["kernel_log"]
    assert found["truncated"] and found["read_bytes"] <= 64 * 1024
    assert [e["bus_id"] for e in found["events"]] == ["00000000:41:00.0"]


def test_os_facts_are_what_setup_gathers_for_its_distribution_and_platform_subsets(tmp_path: Path) -> None:
    """The later layers skip their own gathering on these facts: they must be setup's, key for key, here and now."""
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"gather_subset": ["!all", "!min", "distribution", "platform"]}}))
    done = subprocess.run([sys.executable, "-m", "ansible.modules.setup", str(args)], capture_output=True, text=True, check=True)
    gathered = json.loads(done.stdout)["ansible_facts"]
    for setup_own in ("gather_subset", "module_setup"):
        gathered.pop(setup_own, None)
    facts = run(check=True, os_facts=True)["ansible_facts"]
    needed = ("os_family", "distribution", "distribution_major_version", "distribution_release", "architecture")
    assert {"ansible_" + name for name in needed} <= set(facts)
    assert facts == gathered
    assert "ansible_facts" not in run(check=True)
