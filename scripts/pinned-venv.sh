# Sourced by scripts/moto.sh and scripts/cfn-lint.sh: installs one pinned PyPI tool into a venv of
# its own, once, outside the clone; parallel test runs share the venv, one installer at a time.
#   pinned_venv DIST VERSION SPEC VENV EXECUTABLE
# DIST is the distribution whose version is checked, SPEC what pip installs (`moto[server]`),
# EXECUTABLE the path that must exist afterwards. Install chatter goes to stderr.

pinned_venv() {
  local dist="$1" version="$2" spec="$3" venv="$4" executable="$5"
  installed_version() {
    "$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$dist'))" 2>/dev/null || true
  }
  if [ ! -x "$executable" ] || [ "$(installed_version)" != "$version" ]; then
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    if command -v flock >/dev/null 2>&1; then flock 9; fi
    if [ ! -x "$executable" ] || [ "$(installed_version)" != "$version" ]; then
      echo "installing $spec==$version into $venv" >&2
      [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec==$version" >&2
    fi
  fi
  [ -x "$executable" ] || { echo "$executable not found after installing $spec==$version" >&2; exit 1; }
}
