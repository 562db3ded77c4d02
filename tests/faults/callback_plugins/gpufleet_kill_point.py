"""Kill a run at a named task: the fault-injection suite's trigger (tests/faults/run.py). Test-only.

Enabled by the suite through ANSIBLE_CALLBACKS_ENABLED; told where and how by the environment:
  GPUFLEET_KILL_TASK   the task's name as the run prints it ("gpufleet.nvidia.driver : Install ..."), exactly;
                       a trailing * matches any rest (a version in the name)
  GPUFLEET_KILL_AT     start:<seconds>  that long after the task started on the host (mid-task),
                       dpkg             as soon as dpkg, run by the task, has begun changing packages (its
                                        journal, /var/lib/dpkg/updates, has an entry), or
                       end              as soon as the task ended on the host (between two tasks)
  GPUFLEET_KILL_ACTION controller  the run's whole process group, SIGKILL (an AWX cancel, a dead controller)
                       connection  sshd stopped and the node's SSH sessions SIGKILLed (a network cut: the node
                                   keeps running, unreachable until the suite starts sshd again)
                       node        the node's container, SIGKILL to its init (power loss)
  GPUFLEET_KILL_NODE   the node's container name
  GPUFLEET_KILL_MARK   a file written when the point is reached (the suite fails a point never reached)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: gpufleet_kill_point
type: aggregate
short_description: kill a run at a named task (gpufleet's fault-injection suite only)
description: see the module's docstring.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet_kill_point"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.task = os.environ.get("GPUFLEET_KILL_TASK", "")
        self.at = os.environ.get("GPUFLEET_KILL_AT", "end")
        self.action = os.environ.get("GPUFLEET_KILL_ACTION", "controller")
        self.node = os.environ.get("GPUFLEET_KILL_NODE", "")
        self.mark = os.environ.get("GPUFLEET_KILL_MARK", "")
        self.fired = False
        self.armed: str | None = None

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        # The name as printed (templated) is known here only; the runner callbacks see the same task by its uuid.
        name = task.get_name().strip()
        wanted = self.task[:-1] if self.task.endswith("*") else None
        if not self.fired and self.task and (name.startswith(wanted) if wanted is not None else name == self.task):
            self.armed = task._uuid

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def _matches(self, task) -> bool:
        return not self.fired and self.armed is not None and task._uuid == self.armed

    def v2_runner_on_start(self, host, task) -> None:
        if self.at.startswith("start:") and self._matches(task):
            self._fire(float(self.at.split(":", 1)[1]))
        elif self.at == "dpkg" and self._matches(task):
            self.fired = True
            threading.Thread(target=self._when_dpkg_runs, daemon=True).start()

    def _when_dpkg_runs(self) -> None:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            journal = subprocess.run(["podman", "exec", self.node, "sh", "-c", "ls -A /var/lib/dpkg/updates | grep -q ."], check=False, capture_output=True)
            if journal.returncode == 0:
                self.fired = False
                self._fire(0.0)
                return
            time.sleep(0.05)

    def _on_end(self, result) -> None:
        if self.at == "end" and self._matches(result._task):
            self._fire(0.0)

    v2_runner_on_ok = _on_end
    v2_runner_on_skipped = _on_end

    def _fire(self, delay: float) -> None:
        self.fired = True
        if self.mark:
            with open(self.mark, "w", encoding="utf-8") as handle:
                json.dump({"task": self.task, "at": self.at, "action": self.action, "time": time.time()}, handle)
        if delay <= 0:
            self._act()
        else:
            threading.Timer(delay, self._act).start()

    def _act(self) -> None:
        if self.action == "connection":
            # A network cut: the node is unreachable until the suite brings sshd back after this run ended (a cut
            # between two tasks would otherwise only cost a reconnect). What the node runs, it goes on running.
            # sshd-session (OpenSSH >= 9.8) serves each connection, the ControlPersist master's too.
            subprocess.run(
                ["podman", "exec", self.node, "sh", "-c", "systemctl stop ssh.service; pkill -KILL -f '^sshd-session'"],
                check=False,
                capture_output=True,
            )
        elif self.action == "node":
            subprocess.run(["podman", "kill", "--signal", "KILL", self.node], check=False, capture_output=True)
        else:
            os.killpg(os.getpgid(0), signal.SIGKILL)
