#!/usr/bin/env bash
# Builds Jaeger (pinned, from the Go module proxy) once, outside the clone, and prints the path of
# the binary. The end-to-end traces test (tests/e2e/traces.rs) sends the plugin's traces to it over
# OTLP and reads them back through its query API.
#   export JAEGER_BIN="$(scripts/jaeger.sh)"
# The cache is ${ECS_EA_JAEGER_DIR:-/var/tmp/ecs-elastic-agent-jaeger}/<version>/jaeger; parallel
# test runs share it, one builder at a time. Needs Go (1.24 or newer); all chatter goes to stderr.
set -euo pipefail

JAEGER_VERSION="v1.75.0"
cache="${ECS_EA_JAEGER_DIR:-/var/tmp/ecs-elastic-agent-jaeger}"
dir="$cache/$JAEGER_VERSION"
binary="$dir/jaeger"

if [ ! -x "$binary" ]; then
  command -v go >/dev/null || { echo "building Jaeger needs Go (https://go.dev/dl/)" >&2; exit 1; }
  mkdir -p "$dir"
  exec 9>"$dir.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -x "$binary" ]; then
    echo "building jaeger $JAEGER_VERSION into $dir (a few minutes, once)" >&2
    module="$(mktemp -d)"
    trap 'rm -rf "$module"' EXIT
    (
      cd "$module"
      go mod init ecs-elastic-agent-jaeger >&2 2>&1
      go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$JAEGER_VERSION" >&2 2>&1
      CGO_ENABLED=0 go build -trimpath -o "$binary.partial" github.com/jaegertracing/jaeger/cmd/jaeger >&2
    )
    mv "$binary.partial" "$binary"
  fi
fi
[ -x "$binary" ] || { echo "$binary not found after building jaeger $JAEGER_VERSION" >&2; exit 1; }
echo "$binary"
