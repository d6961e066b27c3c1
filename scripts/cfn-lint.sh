#!/usr/bin/env bash
# Installs cfn-lint (pinned) into a venv of its own once, then lints every CloudFormation template
# of packaging/cloudformation/ (or the files given). Exits non-zero on any error or warning.
#   scripts/cfn-lint.sh                       # every template
#   scripts/cfn-lint.sh path/to/template.yaml
# The venv is ${ECS_EA_CFN_LINT_VENV:-/var/tmp/ecs-elastic-agent-cfn-lint-venv}, apart from moto's
# (moto depends on cfn-lint too, at whatever version it resolves); install chatter goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

CFN_LINT_VERSION="1.58.0"
venv="${ECS_EA_CFN_LINT_VENV:-/var/tmp/ecs-elastic-agent-cfn-lint-venv}"
lint="$venv/bin/cfn-lint"

. scripts/pinned-venv.sh
pinned_venv cfn-lint "$CFN_LINT_VERSION" cfn-lint "$venv" "$lint"

if [ $# -eq 0 ]; then
  set -- packaging/cloudformation/*.yaml
fi
# cfn-lint exits with a bit mask (2 errors, 4 warnings, 8 informational); any of them fails here.
status=0
"$lint" --format parseable -- "$@" || status=$?
if [ "$status" = 0 ]; then
  echo "cfn-lint $CFN_LINT_VERSION: $# templates ok" >&2
else
  echo "cfn-lint $CFN_LINT_VERSION: problems above (exit $status)" >&2
fi
exit "$status"
