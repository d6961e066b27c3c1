#!/usr/bin/env bash
# Installs moto's server (pinned) into a venv once, and prints the path of `moto_server`.
#   export MOTO_SERVER="$(scripts/moto.sh)"
# The venv is ${ECS_EA_VENV:-/var/tmp/ecs-elastic-agent-venv}; all chatter goes to stderr.
set -euo pipefail

MOTO_VERSION="5.2.5"
venv="${ECS_EA_VENV:-/var/tmp/ecs-elastic-agent-venv}"
server="$venv/bin/moto_server"

installed_version() {
  "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("moto"))' 2>/dev/null || true
}

if [ ! -x "$server" ] || [ "$(installed_version)" != "$MOTO_VERSION" ]; then
  mkdir -p "$(dirname "$venv")"
  # One installer at a time (parallel test runs share the venv).
  exec 9>"$venv.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -x "$server" ] || [ "$(installed_version)" != "$MOTO_VERSION" ]; then
    echo "installing moto[server]==$MOTO_VERSION into $venv" >&2
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
  fi
fi

[ -x "$server" ] || { echo "moto_server not found at $server after install" >&2; exit 1; }
echo "$server"
