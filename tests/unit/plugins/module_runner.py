# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run one of our modules' main() with patched args and capture its outcome.

Used in-process (`run_module`) and as a subprocess entry point
(`python -m ...module_runner MODULE ARGS_JSON OUT_JSON`). A ctypes-loaded
library stays mapped for the life of a process, and two libraries with the
soname libnvidia-ml.so.1 must never meet in one process, so every run that
loads an NVML library goes through a process of its own.

`python -m ...module_runner --serve` is the zygote those processes are
forked from (nvml_sim.run_module_subprocess): it imports the runner and the
modules once and never runs one itself, so every child starts as a fresh
interpreter would, with no library mapped, but without the half second an
interpreter and ansible's imports cost (the unit tests run about 500).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import signal
import sys
import traceback
import typing as t
from unittest import mock

from ansible.module_utils import basic

from ansible_collections.gpufleet.nvidia.plugins.module_utils._nvml import session as nvml_session

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.18, the oldest meta/runtime.yml claims: no helper yet

    @contextlib.contextmanager
    def patch_module_args(args: dict[str, t.Any]) -> t.Iterator[None]:
        """What 2.19's helper does: AnsibleModule reads its arguments from basic._ANSIBLE_ARGS first."""
        with mock.patch.object(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode()):
            yield


class _ModuleExit(Exception):
    def __init__(self, kind: str, result: dict[str, t.Any]) -> None:
        super().__init__(kind)
        self.kind = kind
        self.result = result


def _exit_json(self: basic.AnsibleModule, **kwargs: t.Any) -> None:
    raise _ModuleExit("exit", kwargs)


def _fail_json(self: basic.AnsibleModule, msg: str, **kwargs: t.Any) -> None:
    kwargs.update(failed=True, msg=msg)
    raise _ModuleExit("fail", kwargs)


def run_module(name: str, args: dict[str, t.Any]) -> dict[str, t.Any]:
    """Outcome of plugins/modules/<name>.main() with `args`.

    kind: exit | fail | exception | returned (main() fell off its end);
    result: what exit_json/fail_json got, with `warnings`: what the module passed to warn() (exit_json, which
    would add them, is replaced); traceback: for exceptions;
    resolved: every NVML symbol the binding resolved, in first-use order.
    """
    warned: list[str] = []

    def recording_warn(self: basic.AnsibleModule, warning: str, *a: t.Any, **kw: t.Any) -> None:
        warned.append(str(warning))

    sessions: list[nvml_session.NvmlSession] = []
    original_init = nvml_session.NvmlSession.__init__

    def recording_init(self: nvml_session.NvmlSession, *a: t.Any, **kw: t.Any) -> None:
        sessions.append(self)
        original_init(self, *a, **kw)

    outcome: dict[str, t.Any] = {"kind": "returned", "result": None, "traceback": None}
    module = importlib.import_module("ansible_collections.gpufleet.nvidia.plugins.modules." + name)
    with (
        patch_module_args(args),
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        mock.patch.object(nvml_session.NvmlSession, "__init__", recording_init),
        mock.patch.object(basic.AnsibleModule, "warn", recording_warn),
    ):
        try:
            module.main()
        except _ModuleExit as done:
            outcome.update(kind=done.kind, result=done.result)
        except BaseException:  # pylint: disable=broad-exception-caught
            outcome.update(kind="exception", traceback=traceback.format_exc())
    if warned and isinstance(outcome["result"], dict):
        outcome["result"].setdefault("warnings", []).extend(warned)
    outcome["resolved"] = [symbol for session in sessions for symbol in getattr(session, "resolved", [])]
    return outcome


def module_result(name: str, args: dict[str, t.Any], check: bool = False, diff: bool = False) -> dict[str, t.Any]:
    """What the module returned or failed with, plus `failed`; run in check and diff mode as asked.

    An exception or a main() that returns without exit_json/fail_json fails the test here.
    """
    module_args = dict(args)
    if check:
        module_args["_ansible_check_mode"] = True
    if diff:
        module_args["_ansible_diff"] = True
    outcome = run_module(name, module_args)
    assert outcome["kind"] in ("exit", "fail"), outcome["traceback"] or outcome["kind"]
    return {"failed": outcome["kind"] == "fail", **outcome["result"]}


def serve(requests: t.TextIO, answers: t.TextIO) -> int:
    """Fork one child per request line (JSON: name, args, out, stderr, env, cwd, timeout); answer its exit status.

    The child takes the request's environment and directory, writes its stderr to the request's file,
    and runs main() as the fresh interpreter would. A child that outlives its timeout is killed by its
    own alarm (exit status -14).
    """
    for line in requests:
        request = json.loads(line)
        # Imported here, before the fork: each child then finds the module already loaded.
        importlib.import_module("ansible_collections.gpufleet.nvidia.plugins.modules." + request["name"])
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's exit status is what the parent checks
            status = 1
            try:
                signal.alarm(int(request["timeout"]))
                os.environ.clear()
                os.environ.update(request["env"])
                os.chdir(request["cwd"])
                with open(os.devnull, "rb") as nothing, open(os.devnull, "wb") as out, open(request["stderr"], "wb") as err:
                    os.dup2(nothing.fileno(), 0)
                    os.dup2(out.fileno(), 1)
                    os.dup2(err.fileno(), 2)
                status = main([request["name"], request["args"], request["out"]])
            except BaseException:  # pylint: disable=broad-exception-caught
                traceback.print_exc()
            finally:
                # What the interpreter's own exit would do (AnsibleModule removes its tmpdir at exit).
                atexit._run_exitfuncs()  # pylint: disable=protected-access
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        _pid, wait_status = os.waitpid(pid, 0)
        answers.write(json.dumps({"returncode": os.waitstatus_to_exitcode(wait_status)}) + "\n")
        answers.flush()
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--serve"]:
        return serve(sys.stdin, sys.stdout)
    name, args_path, out_path = argv
    with open(args_path, encoding="utf-8") as handle:
        args = json.load(handle)
    outcome = run_module(name, args)
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(outcome, handle, default=repr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
