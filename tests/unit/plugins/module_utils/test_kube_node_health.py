"""The Node condition and taint a node's GPU health gives (_kube_node_health): set while a GPU is critical, cleared
when none is, and nobody else's condition or taint touched."""

from __future__ import annotations

from ansible_collections.gpufleet.nvidia.plugins.module_utils import _kube_node_health as kh

NOW = "2026-12-01T05:00:00Z"
LATER = "2026-12-01T05:10:00Z"
GPU = {"index": 0, "uuid": "GPU-1", "bus_id": "00000000:07:00.0"}
XID79 = {"check": "xid", "severity": "critical", "gpu": GPU, "seen": "Xid 79 (GPU has fallen off the bus)", "action": "reboot"}
WARN = {"check": "ecc_corrected_volatile", "severity": "warn", "gpu": GPU, "seen": "12 corrected ECC errors", "action": "none"}
OTHER_TAINT = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}


def test_a_critical_gpu_gives_a_true_condition_in_nvsentinels_form():
    found = kh.condition([XID79, WARN], NOW)
    assert found == {
        "type": "GpufleetGpuHealth",
        "status": "True",
        "reason": "GpufleetGpuHealthIsNotHealthy",
        "message": "ErrorCode:xid GPU:00000000:07:00.0 Xid 79 (GPU has fallen off the bus) Recommended Action=REBOOT;",
        "lastHeartbeatTime": NOW,
        "lastTransitionTime": NOW,
    }


def test_no_critical_gpu_gives_a_false_condition_and_keeps_the_transition_while_the_status_stays():
    healthy = kh.condition([WARN], NOW)
    assert (healthy["status"], healthy["reason"], healthy["message"]) == ("False", "GpufleetGpuHealthIsHealthy", "No Health Failures")
    again = kh.condition([], LATER, current=healthy)
    assert (again["lastTransitionTime"], again["lastHeartbeatTime"]) == (NOW, LATER)
    sick = kh.condition([XID79], LATER, current=healthy)
    assert sick["lastTransitionTime"] == LATER


def test_a_long_message_is_cut_to_what_nvsentinel_keeps():
    many = [dict(XID79, seen="Xid 79 " + "x" * 200) for _entry in range(10)]
    assert len(kh.condition(many, NOW)["message"]) == kh.MESSAGE_MAX


def test_the_condition_changes_only_on_what_a_reader_acts_on():
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}, kh.condition([XID79], NOW)]}}
    assert not kh.condition_changed(node, kh.condition([XID79], LATER, kh.current_condition(node)))
    assert kh.condition_changed(node, kh.condition([], LATER, kh.current_condition(node)))
    assert kh.condition_changed({"status": {}}, kh.condition([], NOW))


def test_our_taint_is_added_once_and_removed_alone():
    node = {"spec": {"taints": [OTHER_TAINT]}}
    tainted = kh.taints_after(node, True, NOW)
    assert tainted == [OTHER_TAINT, {"key": "gpufleet.nvidia/gpu-health", "value": "critical", "effect": "NoSchedule", "timeAdded": NOW}]
    assert kh.taints_after({"spec": {"taints": tainted}}, True, LATER) is None
    assert kh.taints_after({"spec": {"taints": tainted}}, False, LATER) == [OTHER_TAINT]
    assert kh.taints_after(node, False, LATER) is None
    assert kh.taints_after({"spec": {}}, False, NOW) is None


def test_a_taint_of_ours_with_another_value_is_put_right():
    node = {"spec": {"taints": [{"key": "gpufleet.nvidia/gpu-health", "value": "warn", "effect": "NoSchedule"}]}}
    assert kh.taints_after(node, True, NOW) == [dict(kh.TAINT, timeAdded=NOW)]


class RecordingApi(kh.NodeApi):
    """NodeApi with the API server played by a dict: each PATCH recorded; `conflicts` JSON patches refused, as the
    API server refuses one whose resourceVersion test fails (another writer came between the read and the write)."""

    def __init__(self, node: dict, conflicts: int = 0) -> None:
        # No connection is made: the CA and the context are never used.
        self.server, self.node, self.token, self.timeout, self.context = "https://api", "n1", "t", 1.0, None
        self.stored, self.conflicts, self.writes = node, conflicts, []

    def _request(self, method, path, body=None, content_type="application/json"):
        if method == "GET":
            return self.stored
        self.writes.append((path, content_type, body))
        if content_type == "application/json-patch+json":
            if self.conflicts:
                self.conflicts -= 1
                self.stored["metadata"]["resourceVersion"] = str(int(self.stored["metadata"]["resourceVersion"]) + 1)
                raise kh.NodeHealthError("HTTP 422: the test operation failed")
            self.stored["spec"]["taints"] = body[1]["value"]
        return {}


def fresh_node(*taints: dict) -> dict:
    return {"metadata": {"name": "n1", "resourceVersion": "7"}, "spec": {"taints": list(taints)}, "status": {"conditions": []}}


def test_check_mode_reads_and_writes_nothing_and_the_diff_shows_the_taint():
    api = RecordingApi(fresh_node(OTHER_TAINT))
    result = api.publish([XID79], NOW, check_mode=True)
    assert api.writes == []
    assert (result["condition"], result["taint"], result["status"]) == (True, True, "True")
    assert result["before"] == {"condition": None, "taints": ["nvidia.com/gpu-error=fatal:NoSchedule"]}
    assert result["after"]["taints"] == ["nvidia.com/gpu-error=fatal:NoSchedule", "gpufleet.nvidia/gpu-health=critical:NoSchedule"]
    assert result["after"]["condition"]["reason"] == "GpufleetGpuHealthIsNotHealthy"


def test_a_taint_write_that_loses_a_race_is_read_and_made_again():
    api = RecordingApi(fresh_node(OTHER_TAINT), conflicts=2)
    api.publish([XID79], NOW)
    taint_writes = [body for _path, kind, body in api.writes if kind == "application/json-patch+json"]
    assert len(taint_writes) == 3 and taint_writes[-1][0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "9"}
    assert [t["key"] for t in api.stored["spec"]["taints"]] == ["nvidia.com/gpu-error", "gpufleet.nvidia/gpu-health"]
    # The status is one strategic-merge patch of our condition alone: others' conditions merge by type and stay.
    status = [body for path, kind, body in api.writes if path.endswith("/status")]
    assert [c["type"] for c in status[0]["status"]["conditions"]] == ["GpufleetGpuHealth"]


def test_a_taint_that_keeps_changing_gives_up_naming_the_node():
    api = RecordingApi(fresh_node(), conflicts=kh.TAINT_TRIES)
    try:
        api.publish([XID79], NOW)
    except kh.NodeHealthError as exc:
        assert "node n1" in str(exc)
    else:
        raise AssertionError("no error")


def test_a_node_without_nvml_is_critical_and_its_credential_must_be_whole(tmp_path):
    sick = kh.condition([kh.nvml_unusable("libnvidia-ml.so.1 not found")], NOW)
    assert sick["status"] == "True" and "ErrorCode:nvml Node:- NVML is not usable: libnvidia-ml.so.1 not found" in sick["message"]
    broken = tmp_path / "node-health.json"
    broken.write_text("[]")
    for path, words in ((broken, "not a JSON object"), (tmp_path / "missing.json", "cannot read the credential")):
        try:
            kh.read_credential(str(path))
        except kh.NodeHealthError as exc:
            assert words in str(exc)
        else:
            raise AssertionError(path)
    try:
        kh.NodeApi({"server": "http://api:8080", "certificate_authority_data": "x", "token": "t", "node": "n1"})
    except kh.NodeHealthError as exc:
        assert "not an https:// URL" in str(exc)
    else:
        raise AssertionError("a token sent without TLS")
    try:
        kh.NodeApi({"server": "https://api", "node": "n1"})
    except kh.NodeHealthError as exc:
        assert str(exc) == "the credential lacks certificate_authority_data, token"
    else:
        raise AssertionError("no error")
