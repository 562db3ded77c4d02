#!/usr/bin/env bash
# How many calls a fresh converge of playbooks/site.yml makes to the node,
# per role and per task: the node and declaration of fresh_converge.sh, one
# converge over SSH with pipelining at -vvv, counted by calls_per_role.py
# (one call per ssh command). Counts, not timings: run it on any machine.
#
#   benchmarks/count_calls.sh                 # per role
#   TASKS=1 KEEP=1 benchmarks/count_calls.sh  # per task; keep the log
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tests/harness/env.sh
. tests/harness/env.sh
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
python3 benchmarks/calls_per_role.py "$work/converge.log" ${TASKS:+--tasks}
[ -z "${KEEP:-}" ] || log "log: $work/converge.log"
