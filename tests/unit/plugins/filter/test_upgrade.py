"""The rolling upgrade's filters: batch settings and the per-node plan.

The plan is fed by the real verify checks (plugin_utils/_verify.py) on
declarations shaped like the declared_layers lookup's, so a node is judged
pending exactly when the verify gate would fail it.
"""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.nvidia.plugins.filter.upgrade import (
    _drain_blockers,
    upgrade_drain_failure,
    upgrade_give_back,
    upgrade_plan,
    upgrade_roll_errors,
    upgrade_take,
)
from ansible_collections.gpufleet.nvidia.plugins.plugin_utils import _verify

GOOD = {"upgrade_serial": 1, "upgrade_max_fail_percentage": 0, "upgrade_layers": ["driver", "container_toolkit"]}


def settings(**changes) -> dict:
    return dict(GOOD, **changes)


@pytest.mark.parametrize("serial", [1, 3, "2", "25%", "100%", " 10 % ", [1, "10%", "50%"], ["1", 2]])
def test_batch_sizes_that_are_accepted(serial):
    assert upgrade_roll_errors(settings(upgrade_serial=serial)) == []


@pytest.mark.parametrize(
    "serial, problem",
    [
        (0, "0 is not a positive number of nodes"),
        (-2, "-2 is not a positive number of nodes"),
        ("0", "'0' is not a positive number of nodes"),
        ("0%", "'0%' is not between 1% and 100%"),
        ("150%", "'150%' is not between 1% and 100%"),
        ("half", "'half' is neither a number of nodes nor a percentage"),
        (True, "True is a boolean"),
        (None, "None is a NoneType"),
        ([], "the list is empty"),
        ([1, "x%"], "'x%' is neither a number of nodes nor a percentage"),
    ],
)
def test_bad_batch_sizes_name_the_variable_and_the_fix(serial, problem):
    errors = upgrade_roll_errors(settings(upgrade_serial=serial))
    assert len(errors) == 1
    assert errors[0].startswith("upgrade_serial: " + problem)
    assert '"25%"' in errors[0] and '[1, "10%", "50%"]' in errors[0]


@pytest.mark.parametrize("value", [0, 25, 100, "50"])
def test_max_fail_percentage_accepted(value):
    assert upgrade_roll_errors(settings(upgrade_max_fail_percentage=value)) == []


@pytest.mark.parametrize("value", [-1, 101, "ten", True, 12.5, None])
def test_max_fail_percentage_rejected(value):
    errors = upgrade_roll_errors(settings(upgrade_max_fail_percentage=value))
    assert len(errors) == 1 and errors[0].startswith("upgrade_max_fail_percentage: {0!r}".format(value))
    assert "give 0 to stop the roll at the first failed node" in errors[0]


@pytest.mark.parametrize("layers", [[], ["cdi"], "driver", None])
def test_layers_rejected(layers):
    errors = upgrade_roll_errors(settings(upgrade_layers=layers))
    assert errors == ["upgrade_layers: {0!r} must be a non-empty list of kernel, driver, container_toolkit".format(layers)]


def test_every_problem_is_reported_at_once():
    errors = upgrade_roll_errors({"upgrade_serial": "x", "upgrade_max_fail_percentage": 200, "upgrade_layers": []})
    assert [e.split(":")[0] for e in errors] == ["upgrade_serial", "upgrade_max_fail_percentage", "upgrade_layers"]


def test_settings_must_be_a_mapping():
    with pytest.raises(AnsibleFilterError, match="upgrade_roll_errors: expected a mapping"):
        upgrade_roll_errors([1])


# -- the plan, from verify's own checks ---------------------------------------------------------------------------


def declared(**variables) -> dict:
    return {"managed": True, "reason": "test", "role": True, "vars": variables}


def nvml(version: str) -> dict:
    return {"status": "ok", "driver_loaded": True, "driver_version": version, "cuda_driver_version": "12.4", "gpu_count": 1, "gpus": []}


def toolkit(installed: str | None) -> dict:
    packages = {} if installed is None else {"nvidia-container-toolkit-base": [{"version": installed}]}
    return _verify.check_container_toolkit(declared(container_toolkit_version="1.20.1", container_toolkit_package_set="base"), packages)


def driver(loaded: str) -> dict:
    return _verify.check_driver(declared(driver_version="550.163.01", driver_branch="550"), nvml(loaded))


def test_a_node_at_its_declaration_is_not_pending():
    plan = upgrade_plan([driver("550.163.01"), toolkit("1.20.1-1")], ["driver", "container_toolkit"])
    assert plan == {
        "layers": ["driver", "container_toolkit"],
        "pending": False,
        "pending_layers": [],
        "reasons": [],
        "summary": "driver and container_toolkit as declared",
    }


def test_an_older_toolkit_is_pending_with_verify_s_reason():
    plan = upgrade_plan([driver("550.163.01"), toolkit("1.17.8-1")], ["driver", "container_toolkit"])
    assert plan["pending"] is True
    assert plan["pending_layers"] == ["container_toolkit"]
    assert plan["reasons"] == ["container_toolkit: package nvidia-container-toolkit-base is 1.17.8-1, pinned 1.20.1"]
    assert plan["summary"] == plan["reasons"][0]


def test_a_missing_toolkit_and_another_loaded_driver_are_both_pending():
    plan = upgrade_plan([driver("535.261.03"), toolkit(None)], ["driver", "container_toolkit"])
    assert plan["pending_layers"] == ["driver", "container_toolkit"]
    assert plan["reasons"][0] == ("driver: loaded driver 535.261.03 differs from the pinned driver_version 550.163.01")


def test_layers_the_roll_leaves_alone_are_ignored():
    plan = upgrade_plan([driver("535.261.03"), toolkit("1.20.1-1")], ["container_toolkit"])
    assert plan["pending"] is False and plan["layers"] == ["container_toolkit"]


def test_unmanaged_and_warning_only_layers_are_not_pending():
    unmanaged = _verify.check_driver({"managed": False, "reason": "no driver"}, nvml("1.0"))
    warned = {"layer": "container_toolkit", "status": "warn", "findings": [{"severity": "warning", "message": "something to look at"}]}
    assert upgrade_plan([unmanaged, warned], ["driver", "container_toolkit"])["pending"] is False


@pytest.mark.parametrize(
    "checks, layers, message",
    [
        ("x", ["driver"], "expected a list of verify_check results"),
        ([{"status": "pass"}], ["driver"], "expected a list of verify_check results"),
        ([], ["cdi"], "layers must be a list of kernel, driver, container_toolkit"),
        ([], "driver", "layers must be a list of kernel, driver, container_toolkit"),
    ],
)
def test_bad_input_is_an_error(checks, layers, message):
    with pytest.raises(AnsibleFilterError, match="upgrade_plan: " + message):
        upgrade_plan(checks, layers)


# Issue 37 (fresh state): the roll marks what it takes and gives back only what still carries its mark.
MARKS = {"annotation": "gpufleet.nvidia/upgrade", "value": "cordoned", "reason": "gpufleet.nvidia upgrade"}
RECORD = {"kubernetes_cordoned": True, "kubernetes_node": "gpu-01", "slurm_drained": True, "slurm_node": "gpu-01", "layers": ["driver"]}


def k8s_node(unschedulable: bool, annotations: dict | None = None) -> dict:
    return {"metadata": {"name": "gpu-01", "annotations": annotations}, "spec": {"unschedulable": True} if unschedulable else {}}


def test_the_roll_takes_a_node_in_service_and_its_own_stopped_rolls_but_not_someone_elses():
    take = upgrade_take(k8s_node(False), "idle", "none", MARKS)
    assert (take["kubernetes_cordon"], take["slurm_drain"], take["left"]) == (True, True, [])
    # A stopped roll's: cordoned with the annotation, drained with the reason (sinfo's line ends in a newline).
    ours = upgrade_take(k8s_node(True, {"gpufleet.nvidia/upgrade": "cordoned"}), "drained", "gpufleet.nvidia upgrade\n", MARKS)
    assert (ours["kubernetes_cordon"], ours["slurm_drain"]) == (True, True)
    theirs = upgrade_take(k8s_node(True, {"other": "x"}), "drained*", "bad DIMM", MARKS)
    assert (theirs["kubernetes_cordon"], theirs["slurm_drain"]) == (False, False)
    assert theirs["left"] == [
        "cordoned in Kubernetes by someone else (no gpufleet.nvidia/upgrade annotation): left cordoned",
        "drained in Slurm by someone else (reason 'bad DIMM'): left drained",
    ]
    # Kubernetes or Slurm left alone: nothing taken there.
    alone = upgrade_take(None, None, None, MARKS)
    assert (alone["kubernetes_cordon"], alone["slurm_drain"]) == (False, False)


def test_a_node_someone_took_while_the_roll_was_stopped_is_not_given_back():
    """The roll recorded its cordon and drain, then stopped before making them; meanwhile an administrator cordoned
    and drained the node. The record alone would give both back: the missing marks keep them."""
    back = upgrade_give_back(RECORD, k8s_node(True), "RMA: GPU 3", MARKS)
    assert (back["uncordon"], back["unmark"], back["resume"]) == (False, False, False)
    assert back["kept"] == [
        "cordoned in Kubernetes without the upgrade's gpufleet.nvidia/upgrade annotation (someone else's cordon): left cordoned",
        "drained in Slurm with the reason 'RMA: GPU 3', not the upgrade's 'gpufleet.nvidia upgrade': left drained",
    ]


def test_the_guards_drain_is_not_wiped():
    """The Slurm health guard re-drained the node with its own reason while the roll had it: the guard's drain stays."""
    reason = "gpufleet health: GPU /dev/nvidia2 (PCI 0000:47:00.0, Slurm index 1) is critical: xid: Xid 79"
    back = upgrade_give_back(RECORD, k8s_node(True, {"gpufleet.nvidia/upgrade": "cordoned"}), reason, MARKS)
    assert (back["uncordon"], back["unmark"], back["resume"]) == (True, True, False)
    assert back["kept"] == ["drained in Slurm with the reason {0!r}, not the upgrade's 'gpufleet.nvidia upgrade': left drained".format(reason)]


def test_what_still_carries_the_mark_is_given_back_and_what_was_not_taken_is_not():
    back = upgrade_give_back(RECORD, k8s_node(True, {"gpufleet.nvidia/upgrade": "cordoned"}), "gpufleet.nvidia upgrade", MARKS)
    assert (back["uncordon"], back["unmark"], back["resume"], back["kept"]) == (True, True, True, [])
    # Someone put it back in service already: nothing to uncordon or resume, the stray annotation goes.
    back = upgrade_give_back(RECORD, k8s_node(False, {"gpufleet.nvidia/upgrade": "cordoned"}), "none", MARKS)
    assert (back["uncordon"], back["unmark"], back["resume"], back["kept"]) == (False, True, False, [])
    # Not taken (the record says so): never given back, marks or not.
    back = upgrade_give_back(
        {"kubernetes_cordoned": False, "slurm_drained": False}, k8s_node(True, {"gpufleet.nvidia/upgrade": "cordoned"}), "gpufleet.nvidia upgrade", MARKS
    )
    assert (back["uncordon"], back["resume"]) == (False, False)
    with pytest.raises(AnsibleFilterError, match="^upgrade marks: expected"):
        upgrade_give_back(RECORD, None, None, {"annotation": "a"})


# -- which disruption budgets keep a drain waiting --------------------------------------------------------------


def pod(name: str, namespace: str = "ml", deleting: bool = False, **labels: str) -> dict:
    meta = {"name": name, "namespace": namespace, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T05:00:00Z"
    return {"metadata": meta}


def budget(name: str, selector, allowed: int = 0, namespace: str = "ml", desired: int = 1, current: int = 1) -> dict:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": selector},
        "status": {"disruptionsAllowed": allowed, "desiredHealthy": desired, "currentHealthy": current},
    }


def test_a_budget_that_allows_no_disruption_names_the_pods_it_selects():
    pods = [pod("train-a", app="train"), pod("serve-a", app="serve"), pod("train-b", namespace="other", app="train")]
    assert _drain_blockers(pods, [budget("train", {"matchLabels": {"app": "train"}}, desired=2, current=2)]) == [
        {"budget": "ml/train", "pod": "ml/train-a", "desired_healthy": 2, "current_healthy": 2}
    ]


def test_a_budget_that_allows_a_disruption_or_a_pod_being_deleted_is_no_blocker():
    pods = [pod("train-a", app="train"), pod("train-old", deleting=True, app="train")]
    assert _drain_blockers(pods, [budget("loose", {"matchLabels": {"app": "train"}}, allowed=1)]) == []
    assert _drain_blockers(pods[1:], [budget("tight", {"matchLabels": {"app": "train"}})]) == []


@pytest.mark.parametrize(
    "selector, selected",
    [
        ({}, ["ml/a", "ml/b", "ml/c"]),  # policy/v1: an empty selector selects the whole namespace
        (None, []),
        ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}, ["ml/a"]),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["gpu"]}]}, ["ml/b", "ml/c"]),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, ["ml/a", "ml/b"]),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, ["ml/c"]),
        ({"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, ["ml/a"]),
    ],
)
def test_label_selectors_select_as_the_api_does(selector, selected):
    pods = [pod("a", app="x", tier="gpu"), pod("b", app="y", tier="cpu"), pod("c", app="x")]
    assert [b["pod"] for b in _drain_blockers(pods, [budget("b", selector)])] == selected


REFUSED = "Failed to delete pod ml/train-a due to: Cannot evict pod as it would violate the pod's disruption budget."
LEFT = "; the node is left cordoned with the upgrade's mark, and the next roll takes it over."


def test_a_budget_refusal_names_each_budget_and_the_pods_it_protects():
    pods = [pod("train-a", app="train"), pod("serve-a", app="serve")]
    budgets = [budget("train", {"matchLabels": {"app": "train"}}, desired=2, current=2), budget("serve", {"matchLabels": {"app": "serve"}})]
    assert upgrade_drain_failure(REFUSED, pods, budgets, "gpu-7", 600) == (
        "Kubernetes node gpu-7 did not drain within upgrade_kubernetes_drain_timeout (600 s): the eviction API refuses to evict "
        "pod ml/serve-a, which PodDisruptionBudget ml/serve protects (it needs 1 healthy pods and has 1); "
        "pod ml/train-a, which PodDisruptionBudget ml/train protects (it needs 2 healthy pods and has 2). "
        "Let the budget allow a disruption (more replicas elsewhere, or a lower minAvailable) and run the roll again" + LEFT
    )


def test_a_budget_refusal_with_no_budget_refusing_now_says_so():
    loose = [budget("train", {"matchLabels": {"app": "train"}}, allowed=1)]
    message = upgrade_drain_failure(REFUSED, [pod("train-a", app="train")], loose, "gpu-7", 5)
    assert message.endswith(REFUSED + " No budget refuses now: run the roll again" + LEFT), message


@pytest.mark.parametrize(
    "refusal, option",
    [
        ("Pod deletion errors: cannot delete Pods with local storage: ml/scratch.", "upgrade_kubernetes_drain_options.delete_emptydir_data to true"),
        (
            "Pod deletion errors: cannot delete Pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or StatefulSet "
            "(use option force set to yes): ml/bare.",
            "upgrade_kubernetes_drain_options.force to true",
        ),
    ],
)
def test_a_pod_the_drain_may_not_evict_names_the_option(refusal, option):
    message = upgrade_drain_failure(refusal, [], [], "gpu-7", 600)
    assert message.startswith("Kubernetes node gpu-7 was not drained: " + refusal + " ")
    assert "set " + option in message and message.endswith(LEFT)


def test_any_other_failure_is_passed_on():
    assert upgrade_drain_failure("Failed to list pod from node gpu-7 due to: Forbidden.", [], [], "gpu-7", 600) == (
        "Kubernetes node gpu-7 was not drained: Failed to list pod from node gpu-7 due to: Forbidden" + LEFT
    )


def test_drain_failure_needs_lists():
    with pytest.raises(AnsibleFilterError, match="upgrade_drain_failure"):
        upgrade_drain_failure(REFUSED, {"items": []}, [], "gpu-7", 600)
