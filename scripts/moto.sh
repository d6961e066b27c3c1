#!/usr/bin/env bash
# Installs moto's server (pinned) into a venv once, and prints the path of `moto_server`.
#   export MOTO_SERVER="$(scripts/moto.sh)"
# The venv is ${ECS_EA_VENV:-/var/tmp/ecs-elastic-agent-venv}; all chatter goes to stderr.
set -euo pipefail

MOTO_VERSION="5.2.5"
venv="${ECS_EA_VENV:-/var/tmp/ecs-elastic-agent-venv}"
server="$venv/bin/moto_server"

. "$(dirname "$0")/pinned-venv.sh"
pinned_venv moto "$MOTO_VERSION" "moto[server]" "$venv" "$server"
echo "$server"
