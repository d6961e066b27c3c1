#!/usr/bin/env bash
# Fetches AngularJS (pinned, the npm package `angular`) once, outside the clone, and prints the path
# of `angular.min.js`. The profile-form browser test (tests/local/profile_views.rs) renders the
# plugin's views with it in headless Chromium, as GoCD does.
#   export ANGULAR_JS="$(scripts/angular.sh)"
# 1.0.8 is the AngularJS GoCD itself ships for plugin views: gocd/gocd vendors this npm package in
# server/src/main/webapp/WEB-INF/rails/node-vendor/angular, and its lib/angular.min.js is the file
# checked below, byte for byte. The cache is
# ${ECS_EA_ANGULAR_DIR:-/var/tmp/ecs-elastic-agent-angular}/<version>/angular.min.js; parallel test
# runs share it, one fetcher at a time. Needs npm; all chatter goes to stderr.
set -euo pipefail

ANGULAR_VERSION="1.0.8"
# The registry's sha512 of angular-1.0.8.tgz (its `dist.integrity`, in hex) and the sha256 of the
# lib/angular.min.js inside, which is GoCD's vendored copy.
TARBALL_SHA512="c44e1635510703cf1a2f2bbe70977d18cc5046a6ed0ef3ce4008a772eef86dd86a537f281823429f3c30dd751433f2289f3702e8d3545f93ccd61e0f344b81f4"
ANGULAR_MIN_SHA256="e28ec298a331f5700efdfc81ca49823437441b27df26da43f7041dda25629f9d"
cache="${ECS_EA_ANGULAR_DIR:-/var/tmp/ecs-elastic-agent-angular}"
dir="$cache/$ANGULAR_VERSION"
file="$dir/angular.min.js"

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ ! -f "$file" ] || [ "$(sha256_of "$file")" != "$ANGULAR_MIN_SHA256" ]; then
  command -v npm >/dev/null || { echo "fetching AngularJS needs npm (apt-get install npm)" >&2; exit 1; }
  mkdir -p "$dir"
  exec 9>"$dir.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -f "$file" ] || [ "$(sha256_of "$file")" != "$ANGULAR_MIN_SHA256" ]; then
    echo "fetching angular@$ANGULAR_VERSION from the npm registry into $dir (once)" >&2
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && npm pack --silent "angular@$ANGULAR_VERSION" >&2)
    tarball="$work/angular-$ANGULAR_VERSION.tgz"
    got="$(sha512sum "$tarball" | cut -d' ' -f1)"
    [ "$got" = "$TARBALL_SHA512" ] || { echo "angular-$ANGULAR_VERSION.tgz has sha512 $got, not the pinned one" >&2; exit 1; }
    tar --no-same-owner -xzf "$tarball" -C "$work" package/lib/angular.min.js
    chmod 0644 "$work/package/lib/angular.min.js"
    got="$(sha256_of "$work/package/lib/angular.min.js")"
    [ "$got" = "$ANGULAR_MIN_SHA256" ] || { echo "angular.min.js has sha256 $got, not the pinned one" >&2; exit 1; }
    mv "$work/package/lib/angular.min.js" "$file.partial"
    mv "$file.partial" "$file"
  fi
fi
[ -f "$file" ] || { echo "$file not found after fetching angular@$ANGULAR_VERSION" >&2; exit 1; }
echo "$file"
