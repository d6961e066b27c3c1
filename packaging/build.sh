#!/usr/bin/env bash
# Builds the release archive dist/ecs-elastic-agent-<version>-<target>.tar.gz:
#   bin/ecs-elastic-agent     the plugin (and the operators' tools)
#   plugin.json               the host manifest: id, version, extension and versions, command
#   INSTALL.md README.md      how to install it beside a GoCD-compatible server
#   profiles/                 example cluster and elastic profiles
#   iam/                      the IAM policies of those examples, printed by `iam-policy` at build time:
#                             <cluster>.json (the plugin's policy) and, with RoleArn,
#                             <cluster>.trust-policy.json and <cluster>.caller-policy.json, each a
#                             document IAM takes as it is
#   docs/                     getting started, profile keys and images/ (their forms), operators' guide, ...
#   cloudformation/           the CloudFormation stacks (cluster.yaml, member-account.yaml) and their README
#   CHANGELOG.md              what each version changed and what an operator must do
#   ecs-elastic-agent-gocd-<version>.jar   the GoCD plugin jar carrying the binary (also put in dist/)
#
#   packaging/build.sh                    # release build (cargo build --release --locked)
#   PROFILE=debug packaging/build.sh      # package the debug build instead (fast; for tests)
#   BINARY=/path/to/ecs-elastic-agent packaging/build.sh   # package this binary, build nothing
#   DIST_DIR=/tmp/out packaging/build.sh  # where the archive goes (default dist/)
#   JAR=0 / JAR=1 packaging/build.sh      # skip / force the GoCD plugin jar (default: only for a
#                                         # release build without BINARY; needs Java 17 and Maven)
#   AARCH64=0 / AARCH64=1 packaging/build.sh   # leave out / add the Linux aarch64 binary in the jar
#                                         # (default AARCH64=auto with the jar of a release build
#                                         # without BINARY: added when the cross toolchain is there;
#                                         # when it is not, a WARNING on stderr says what is missing
#                                         # and the jar and archive are built with x86_64 only;
#                                         # AARCH64=1 fails instead). Cross-built with Debian's
#                                         # toolchain (.cargo/config.toml; apt-get install
#                                         # gcc-aarch64-linux-gnu qemu-user; rustup target add
#                                         # aarch64-unknown-linux-gnu) and its --version and hello
#                                         # checked under qemu-aarch64
#   AARCH64_GCC=name packaging/build.sh   # the cross gcc AARCH64=auto looks for (default
#                                         # aarch64-linux-gnu-gcc, as .cargo/config.toml names it)
#   BINARY_AARCH64=/path packaging/build.sh    # put this aarch64 binary in the jar, build none
#   packaging/build.sh iam                # only regenerate packaging/iam/*.json from profiles/
# Prints the archive's path on stdout, nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/ecs-elastic-agent-target}"
profile="${PROFILE:-release}"
case "$profile" in release|debug) ;; *) echo "PROFILE must be release or debug, not $profile" >&2; exit 2 ;; esac

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
manifest_version=$(sed -n 's/.*"version": "\(.*\)".*/\1/p' packaging/plugin.json)
[ "$version" = "$manifest_version" ] || { echo "packaging/plugin.json says $manifest_version, Cargo.toml $version" >&2; exit 1; }
pom_version=$(sed -n 's|^  <version>\(.*\)</version>|\1|p' packaging/gocd-plugin/pom.xml | head -1)
[ "$version" = "$pom_version" ] || { echo "packaging/gocd-plugin/pom.xml says $pom_version, Cargo.toml $version" >&2; exit 1; }
for stack in packaging/cloudformation/cluster.yaml packaging/cloudformation/member-account.yaml; do
  stack_version=$(sed -n '3s/^  ecs-elastic-agent \([^,]*\),.*/\1/p' "$stack")
  [ "$version" = "$stack_version" ] \
    || { echo "$stack's Description says version ${stack_version:-(none)}, Cargo.toml $version" >&2; exit 1; }
done

binary="${BINARY:-}"
if [ -z "$binary" ]; then
  if [ "$profile" = release ]; then
    cargo build --release --locked --bin ecs-elastic-agent >&2
  else
    cargo build --locked --bin ecs-elastic-agent >&2
  fi
  binary="$CARGO_TARGET_DIR/$profile/ecs-elastic-agent"
fi
[ -x "$binary" ] || { echo "no binary at $binary" >&2; exit 1; }

# The GoCD plugin jar around this binary (packaging/gocd-plugin; its tests run in scripts/test).
jar_mode="${JAR:-}"
if [ -z "$jar_mode" ]; then
  if [ -z "${BINARY:-}" ] && [ "$profile" = release ]; then jar_mode=1; else jar_mode=0; fi
fi

# The Linux aarch64 binary the jar carries beside this one: cross-built, then run under qemu-user
# (its --version, and the hello line `serve` writes first) before it goes in.
aarch64_target=aarch64-unknown-linux-gnu
aarch64_mode="${AARCH64:-}"
if [ -z "$aarch64_mode" ]; then
  if [ "$jar_mode" = 1 ] && { [ -n "${BINARY_AARCH64:-}" ] || [ -z "${BINARY:-}" ]; }; then aarch64_mode=auto; else aarch64_mode=0; fi
fi
case "$aarch64_mode" in 0|1|auto) ;; *) echo "AARCH64 must be 0, 1 or auto, not $aarch64_mode" >&2; exit 2 ;; esac
binary_aarch64="${BINARY_AARCH64:-}"
aarch64_gcc="${AARCH64_GCC:-aarch64-linux-gnu-gcc}"
# What the aarch64 binary needs and this machine lacks, one line each with how to install it.
aarch64_missing() {
  if [ -z "$binary_aarch64" ]; then
    command -v "$aarch64_gcc" >/dev/null \
      || echo "  - $aarch64_gcc, the cross C compiler and linker: apt-get install gcc-aarch64-linux-gnu"
    local libdir
    libdir=$(rustc --print target-libdir --target "$aarch64_target" 2>/dev/null || true)
    { [ -n "$libdir" ] && compgen -G "$libdir/libcore-*" >/dev/null; } \
      || echo "  - Rust's $aarch64_target standard library: rustup target add $aarch64_target"
  fi
  command -v qemu-aarch64 >/dev/null \
    || echo "  - qemu-aarch64, to check the aarch64 binary before it goes in: apt-get install qemu-user"
}
if [ "$aarch64_mode" = auto ]; then
  missing=$(aarch64_missing)
  if [ -z "$missing" ]; then
    aarch64_mode=1
  else
    aarch64_mode=0
    {
      echo "WARNING: building WITHOUT the Linux aarch64 binary: the GoCD plugin jar will run on Linux x86_64 only"
      echo "(its plugin.xml says so). The aarch64 cross build needs what this machine lacks:"
      echo "$missing"
      echo "Install those and build again for a jar with both binaries (AARCH64=1 makes their absence an error;"
      echo "AARCH64=0 leaves the aarch64 binary out without this warning)."
    } >&2
  fi
fi
if [ "$aarch64_mode" = 1 ]; then
  if [ -z "$binary_aarch64" ]; then
    command -v aarch64-linux-gnu-gcc >/dev/null \
      || { echo "no aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu (or AARCH64=0)" >&2; exit 1; }
    if [ "$profile" = release ]; then
      cargo build --release --locked --target "$aarch64_target" --bin ecs-elastic-agent >&2
    else
      cargo build --locked --target "$aarch64_target" --bin ecs-elastic-agent >&2
    fi
    binary_aarch64="$CARGO_TARGET_DIR/$aarch64_target/$profile/ecs-elastic-agent"
  fi
  [ -x "$binary_aarch64" ] || { echo "no aarch64 binary at $binary_aarch64" >&2; exit 1; }
  command -v qemu-aarch64 >/dev/null \
    || { echo "no qemu-aarch64 to check the aarch64 binary: apt-get install qemu-user (or AARCH64=0)" >&2; exit 1; }
  sysroot="${AARCH64_SYSROOT:-/usr/aarch64-linux-gnu}"
  said=$(qemu-aarch64 -L "$sysroot" "$binary_aarch64" --version)
  [ "$said" = "ecs-elastic-agent $version" ] \
    || { echo "the aarch64 binary says \"$said\" to --version, not \"ecs-elastic-agent $version\"" >&2; exit 1; }
  hello=$(qemu-aarch64 -L "$sysroot" "$binary_aarch64" serve </dev/null 2>/dev/null | head -1)
  case "$hello" in
    '{"type":"hello",'*"\"version\":\"$version\""*) echo "aarch64 binary checked under qemu-aarch64: $said; hello $hello" >&2 ;;
    *) echo "the aarch64 binary's first line is not the hello: $hello" >&2; exit 1 ;;
  esac
fi

jar=""
if [ "$jar_mode" = 1 ]; then
  aarch64_arg=()
  if [ "$aarch64_mode" = 1 ]; then aarch64_arg=(-Dplugin.binary.aarch64="$(realpath "$binary_aarch64")"); fi
  mvn -B -q -f packaging/gocd-plugin/pom.xml package -Dplugin.binary="$(realpath "$binary")" "${aarch64_arg[@]}" >&2
  jar="packaging/gocd-plugin/target/ecs-elastic-agent-gocd-$version.jar"
  [ -f "$jar" ] || { echo "maven made no $jar" >&2; exit 1; }
fi

# Each example cluster profile with the elastic profiles meant for it (tests/local/cli_validate.rs
# checks the same pairs).
iam_policies() {
  local out="$1"
  mkdir -p "$out"
  local pairs=(
    "cluster-fargate:elastic-small"
    "cluster-fargate-spot-assume-role:elastic-small"
    "cluster-ec2:elastic-ec2-docker"
  )
  for pair in "${pairs[@]}"; do
    local cluster="${pair%%:*}" elastic="${pair##*:}"
    "$binary" validate --cluster-profile "profiles/$cluster.json" --elastic-profile "profiles/$elastic.json" >/dev/null \
      || { echo "profiles/$cluster.json with profiles/$elastic.json does not validate" >&2; exit 1; }
    "$binary" iam-policy --cluster-profile "profiles/$cluster.json" --elastic-profile "profiles/$elastic.json" \
      >"$out/$cluster.json" 2>/dev/null
    # The role's documents exist only with RoleArn (iam-policy exits 1 otherwise).
    local document
    for document in trust-policy caller-policy; do
      if ! "$binary" iam-policy --document "$document" --cluster-profile "profiles/$cluster.json" \
        --elastic-profile "profiles/$elastic.json" >"$out/$cluster.$document.json" 2>/dev/null; then
        rm -f "$out/$cluster.$document.json"
      fi
    done
  done
}

if [ "${1:-}" = iam ]; then
  iam_policies packaging/iam
  ls packaging/iam/*.json
  exit 0
fi

target=$(rustc -vV | sed -n 's/^host: //p')
name="ecs-elastic-agent-$version-$target"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/bin" "$root/docs"
cp "$binary" "$root/bin/ecs-elastic-agent"
chmod 755 "$root/bin/ecs-elastic-agent"
cp packaging/plugin.json packaging/INSTALL.md README.md "$root/"
cp -r profiles "$root/"
if [ -n "$jar" ]; then cp "$jar" "$root/"; fi
cp docs/*.md "$root/docs/"
# The profile forms docs/profile-keys.md shows.
cp -r docs/images "$root/docs/"
mkdir -p "$root/cloudformation"
cp packaging/cloudformation/*.yaml packaging/cloudformation/README.md "$root/cloudformation/"
cp CHANGELOG.md "$root/"
iam_policies "$root/iam"
# The archive's policies are the ones committed under packaging/iam (tests/local/packaging.rs too).
for f in "$root"/iam/*.json; do
  cmp -s "$f" "packaging/iam/$(basename "$f")" \
    || { echo "packaging/iam/$(basename "$f") is stale: run packaging/build.sh iam" >&2; exit 1; }
done
for f in packaging/iam/*.json; do
  [ -f "$root/iam/$(basename "$f")" ] \
    || { echo "packaging/iam/$(basename "$f") is no longer printed: run packaging/build.sh iam" >&2; exit 1; }
done
dist="${DIST_DIR:-dist}"
mkdir -p "$dist"
tar -C "$stage" -czf "$dist/$name.tar.gz" --owner=0 --group=0 "$name"
if [ -n "$jar" ]; then
  cp "$jar" "$dist/"
  echo "GoCD plugin jar: $dist/$(basename "$jar")" >&2
fi
echo "$dist/$name.tar.gz"
