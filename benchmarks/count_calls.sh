#!/usr/bin/env bash
# How many calls a fresh converge of playbooks/site.yml makes to the node,
# per role and per task: the node and declaration of fresh_converge.sh, one
# converge over SSH with pipelining at -vvv, counted by calls_per_role.py
# (one call per ssh command). Counts, not timings: run it on any machine.
#
#   benchmarks/count_calls.sh                 # per role
#   TASKS=1 KEEP=1 benchmarks/count_calls.sh  # per task; keep the log
#   PROFILE=1 benchmarks/count_calls.sh       # and where the time went
#
# PROFILE=1 converges a second fresh node the same way without -vvv (which
# slows the controller) and with ansible.posix.profile_tasks, and splits its
# time: the package installations, the other tasks that call the node, and
# the tasks decided on the controller, each with its count and its cost a
# task. Run it on a quiet machine; benchmarks/call_cost.sh gives the unit
# costs of stock modules on the same kind of node for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/harness/env.sh
. tests/harness/env.sh
# shellcheck disable=SC2034 # read by _sim_stack.sh
BENCH_TRANSPORT=ssh
# shellcheck source=benchmarks/_sim_stack.sh
. benchmarks/_sim_stack.sh
node=${BENCH_PREFIX}calls
work=$(mktemp -d)
cleanup() { podman rm -f "$node" >/dev/null 2>&1 || true; [ -n "${KEEP:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
sim_stack_inventory "$work" "$node"
sim_stack_node "$node" "$work"
ansible-playbook playbooks/site.yml -i "$work/hosts.yml" --limit "$node" -vvv >"$work/converge.log" 2>&1 \
  || { tail -40 "$work/converge.log"; die "the converge failed (log: $work/converge.log; KEEP=1 keeps it)"; }
log "converge: $(grep -o 'changed=[0-9]*' "$work/converge.log" | tail -1)"
if [ -n "${PROFILE:-}" ]; then
  podman rm -f "$node" >/dev/null
  sim_stack_node "$node" "$work"
  start=$(date +%s.%N)
  ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks PROFILE_TASKS_TASK_OUTPUT_LIMIT=0 \
    ansible-playbook playbooks/site.yml -i "$work/hosts.yml" --limit "$node" >"$work/timed.log" 2>&1 \
    || { tail -40 "$work/timed.log"; die "the timed converge failed (log: $work/timed.log; KEEP=1 keeps it)"; }
  log "timed converge: $(since "$start") s wall; load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi
python3 benchmarks/calls_per_role.py "$work/converge.log" ${TASKS:+--tasks} ${PROFILE:+--timed "$work/timed.log"}
[ -z "${KEEP:-}" ] || log "log: $work/converge.log"
