#!/bin/bash
# A null agent, the control for the agent's cost in hack/bench-decisions.sh:
# it says it is tracing and does nothing until SIGTERM, so a sequence run with
# it differs from the defaults' only by the script's own agent path.
#
#   cp hack/null-agent.sh bin/shadowtune.null
#   sudo BENCH_SETTINGS="none/2560 agent.null agent" hack/bench-decisions.sh bin/shadowtune 8
trap 'exit 0' TERM
echo '"level"=0 "msg"="tracing"' >&2
while :; do sleep 1 & wait $!; done
