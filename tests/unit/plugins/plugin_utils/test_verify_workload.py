# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The workload layer: which containers a host's check starts, and how their results are judged."""

from __future__ import annotations

import typing as t

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.verify import verify_check, workload_plan

IMAGE = "site/cuda-probe:1.0@sha256:" + "1" * 64
NVML = {
    "status": "ok",
    "driver_version": "550.163.01",
    "gpus": [
        {"index": 0, "uuid": "GPU-0", "mig": {"devices": [{"uuid": "MIG-0a"}, {"uuid": "MIG-0b"}]}},
        {"index": 1, "uuid": "GPU-1", "mig": {"devices": []}},
        {"index": 2, "uuid": "GPU-2", "mig": {"devices": [{"uuid": "MIG-2a"}]}},
    ],
}


def layers(engine: str = "containerd", runtime: bool = True, mig: bool = True, strategy: t.Any = None) -> dict[str, t.Any]:
    return {
        "container_runtime": {
            "managed": runtime,
            "reason": "test",
            "vars": {"container_runtime_engine": engine, "container_runtime_nvidia_runtime_name": "nvidia"},
        },
        "mig": {"managed": mig, "reason": "test", "vars": {}},
        "cdi": {"managed": True, "reason": "test", "vars": {"cdi_device_name_strategy": strategy}},
    }


def settings(**kw: t.Any) -> dict[str, t.Any]:
    base = {"enabled": True, "image": IMAGE, "archive_url": "", "archive_checksum": "", "mig_devices": True}
    base.update(kw)
    return base


def test_one_container_for_every_gpu_and_one_per_gpu_for_its_mig_devices() -> None:
    plan = workload_plan(NVML, layers(), settings())
    assert (plan["managed"], plan["run"], plan["engine"], plan["runtime_handler"]) == (True, True, "containerd", "nvidia")
    assert plan["devices"] == [
        {"cdi": ["nvidia.com/gpu=all"], "gpus": ["GPU-0", "GPU-1", "GPU-2"], "migs": ["MIG-0a", "MIG-0b", "MIG-2a"]},
        # Each MIG device by its CDI name; those of one GPU together, seeing that GPU and nothing else.
        {"cdi": ["nvidia.com/gpu=MIG-0a", "nvidia.com/gpu=MIG-0b"], "gpus": ["GPU-0"], "migs": ["MIG-0a", "MIG-0b"]},
        {"cdi": ["nvidia.com/gpu=MIG-2a"], "gpus": ["GPU-2"], "migs": ["MIG-2a"]},
    ]


def test_mig_devices_are_checked_whoever_made_them_and_need_uuid_names() -> None:
    assert len(workload_plan(NVML, layers(mig=False), settings())["devices"]) == 3
    assert len(workload_plan(NVML, layers(strategy="index"), settings())["devices"]) == 1
    assert len(workload_plan(NVML, layers(), settings(mig_devices=False))["devices"]) == 1


def test_cuda_images_that_should_run_get_a_container_each() -> None:
    images = [{"name": "site/cuda:12.4@sha256:" + "2" * 64, "run": True}, {"name": "site/cuda:13.0", "run": False}]
    plan = workload_plan(NVML, layers(mig=False), settings(mig_devices=False), images)
    assert [d.get("image") for d in plan["devices"]] == [None, images[0]["name"]]


@pytest.mark.parametrize(
    "layer_kw, settings_kw, managed, reason",
    [
        ({"runtime": False}, {}, False, "no engine is configured"),
        ({}, {"enabled": False}, False, "verify_workload is false"),
        ({}, {"image": ""}, True, "verify_workload_image is not set"),
    ],
)
def test_when_the_check_does_not_run_it_says_why(layer_kw, settings_kw, managed, reason) -> None:
    plan = workload_plan(NVML, layers(**layer_kw), settings(**settings_kw))
    assert (plan["managed"], plan["run"]) == (managed, False)
    assert reason in plan["reason"]
    judged = verify_check({"result": None}, "workload", plan)
    assert judged["status"] == ("not_managed" if not managed else "warn")
    if managed:
        assert "verify_workload_image" in judged["findings"][0]["fix"]


def test_the_archive_is_kept_in_the_image_directory() -> None:
    plan = workload_plan(
        NVML, layers(), settings(archive_url="http://mirror/images/probe.oci.tar", archive_checksum="sha256:" + "0" * 64, image_dir="/var/lib/x/")
    )
    assert plan["archive"] == "/var/lib/x/probe.oci.tar"
    assert workload_plan(NVML, layers(), settings())["archive"] == ""


def test_an_archive_needs_its_sha256() -> None:
    with pytest.raises(AnsibleFilterError, match="verify_workload_image_archive_checksum: give the archive's sha256"):
        workload_plan(NVML, layers(), settings(archive_url="http://mirror/probe.tar", archive_checksum="abc"))


def run(status: str = "pass", error: str | None = None, **kw: t.Any) -> dict[str, t.Any]:
    base = {
        "cdi": ["nvidia.com/gpu=all"],
        "image": IMAGE,
        "status": status,
        "seconds": 0.6,
        "gpus": ["GPU-0", "GPU-1"],
        "migs": [],
        "driver_version": "550.163.01",
        "missing": [],
        "unexpected": [],
        "error": error,
    }
    base.update(kw)
    return base


def judge(*runs: dict[str, t.Any]) -> dict[str, t.Any]:
    plan = workload_plan(NVML, layers(mig=False), settings(mig_devices=False))
    return verify_check({"result": {"image": {"ref": IMAGE, "present": True}, "runs": list(runs)}}, "workload", plan)


def test_a_passing_run_passes() -> None:
    judged = judge(run())
    assert judged["status"] == "pass"
    assert judged["summary"] == "containerd (runtime handler nvidia): 1 container(s) saw the host's GPUs and driver"
    assert "seconds" not in judged["observed"]["runs"][0]


# Failure text as the module reports it (engine_error of the real engines' output).
@pytest.mark.parametrize(
    "error, cause, fix",
    [
        (
            "crictl create (the GPU container) failed: failed to create containerd container: CDI device injection "
            "failed: unresolvable CDI devices nvidia.com/gpu=all",
            "the engine cannot resolve the CDI device",
            "cdi layer",
        ),
        (
            'crictl runp (the pod sandbox) failed: failed to get sandbox runtime: no runtime for "nvidia" is configured',
            "the engine does not know the runtime handler",
            "container_runtime layer",
        ),
        ("the check command (nvidia-smi -L) did not finish within the time limit of 5 s", "the container did not finish in time", "verify_workload_timeout"),
        ("the container does not see GPU-1", "does not see every device NVML reports", "create-dev-char-symlinks"),
        ("the container reports driver 550.127.05, the host runs 550.163.01", "another driver's libraries", "cdi layer"),
        ("image site/cuda-probe:1.0: it is not on the node, no archive is given and pulling is off", "the image is missing", "offline bundle"),
    ],
)
def test_each_failure_names_engine_handler_device_and_cause(error: str, cause: str, fix: str) -> None:
    judged = judge(run("fail", error))
    assert judged["status"] == "fail"
    message = judged["findings"][0]["message"]
    assert message.startswith("containerd (runtime handler nvidia), CDI device nvidia.com/gpu=all")
    assert cause in message and error in message
    assert fix in judged["findings"][0]["fix"]


def test_check_mode_without_the_image_is_not_a_pass() -> None:
    judged = judge(run("skipped", "image x: not on the node; check mode does not import or pull it"))
    assert judged["status"] == "not_available"
