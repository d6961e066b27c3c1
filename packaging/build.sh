#!/usr/bin/env bash
# Builds the release archive: dist/ecs-elastic-agent-<version>-<target>.tar.gz holding the
# binary, the host manifest (plugin.json), the example profiles and the docs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/ecs-elastic-agent-target}"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
manifest_version=$(sed -n 's/.*"version": "\(.*\)".*/\1/p' packaging/plugin.json)
[ "$version" = "$manifest_version" ] || { echo "packaging/plugin.json says $manifest_version, Cargo.toml $version" >&2; exit 1; }
target=$(rustc -vV | sed -n 's/^host: //p')
cargo build --release --locked
stage=$(mktemp -d)
name="ecs-elastic-agent-$version-$target"
mkdir -p "$stage/$name/bin"
cp "$CARGO_TARGET_DIR/release/ecs-elastic-agent" "$stage/$name/bin/"
cp packaging/plugin.json README.md "$stage/$name/"
cp -r profiles docs "$stage/$name/"
mkdir -p dist
tar -C "$stage" -czf "dist/$name.tar.gz" "$name"
rm -rf "$stage"
echo "dist/$name.tar.gz"
