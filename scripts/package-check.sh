#!/usr/bin/env bash
# Checks the Debian packages the way a person gets them (CI runs this after
# the tests; it needs root and changes the machine, then undoes it):
#   1. build them (scripts/package.sh; the tests' debug build, not rebuilt)
#   2. lintian: no errors; desktop-file-validate and appstreamcli on the entries
#   3. apt-get install ./ledgermind_*.deb ./ledgermind-models_*.deb
#   4. the real-window `app` e2e scenario against /usr/bin/ledgermind-desktop,
#      on an empty HOME and data folder (the models come from the package)
#   5. the window's WM_CLASS against the desktop entry's StartupWMClass
#   6. apt-get purge, and nothing of the packages left under /usr
# Ends with "package check: passed" or names the step that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
log() { printf '\033[1;34m[package-check]\033[0m %s\n' "$*"; }
fail() { echo "package check: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get install); run it in CI or a throwaway machine"
export DIST="${LEDGERMIND_DIST:-$ROOT/dist}" LEDGERMIND_DIST="${LEDGERMIND_DIST:-$ROOT/dist}"
ARTIFACTS="${LEDGERMIND_ARTIFACTS:-$ROOT/artifacts}/package"
mkdir -p "$ARTIFACTS"
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
APP_DEB="$DIST/ledgermind_${VERSION}_amd64.deb"
MODELS_DEB="$DIST/ledgermind-models_${VERSION}_all.deb"

need=()
for t in lintian:lintian desktop-file-validate:desktop-file-utils xprop:x11-utils xdotool:xdotool; do
  command -v "${t%%:*}" >/dev/null || need+=("${t#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || { apt-get -o DPkg::Lock::Timeout=900 update -qq && DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } \
    || fail "cannot install ${need[*]}"
fi

# 1. Build.
t0=$(date +%s)
scripts/package.sh || fail "scripts/package.sh"
log "packages built in $(( $(date +%s) - t0 )) s"
dpkg-deb -I "$APP_DEB" | sed -n '/Package:/,$p' | tee "$ARTIFACTS/control.txt"

# 2. Static checks.
for deb in "$APP_DEB" "$MODELS_DEB"; do
  lintian --tag-display-limit 0 "$deb" > "$ARTIFACTS/lintian-$(basename "$deb").txt" 2>&1
  cat "$ARTIFACTS/lintian-$(basename "$deb").txt"
  if grep -q '^E: ' "$ARTIFACTS/lintian-$(basename "$deb").txt"; then fail "lintian errors in $(basename "$deb")"; fi
done
STAGE=$(mktemp -d /tmp/ledgermind-desktop-entry.XXXXXX)
dpkg-deb -x "$APP_DEB" "$STAGE"
desktop-file-validate "$STAGE/usr/share/applications/ledgermind.desktop" || fail "desktop-file-validate"
if command -v appstreamcli >/dev/null; then
  appstreamcli validate --no-net --explain "$STAGE/usr/share/metainfo/app.ledgermind.desktop.metainfo.xml" || fail "appstreamcli validate"
fi
WMCLASS=$(sed -n 's/^StartupWMClass=//p' "$STAGE/usr/share/applications/ledgermind.desktop")
rm -rf "$STAGE"

# 3. Install as a person would.
if dpkg-query -W -f='${Status}' ledgermind 2>/dev/null | grep -q "install ok installed"; then
  fail "ledgermind is already installed on this machine: this check installs and purges it itself"
fi
STAMP=$(mktemp /tmp/ledgermind-install-stamp.XXXXXX)
sleep 1
# Everything a person's apt would bring, Recommends included (a desktop
# without GNOME gets its shell, ~500 packages), must resolve; the real
# install leaves the Recommends out to keep CI short.
apt-get -s install "$APP_DEB" "$MODELS_DEB" >"$ARTIFACTS/apt-simulate.log" 2>&1 \
  || { tail -20 "$ARTIFACTS/apt-simulate.log"; fail "apt-get -s install (with Recommends) does not resolve"; }
log "with Recommends, apt would install $(grep -c '^Inst' "$ARTIFACTS/apt-simulate.log") packages; installing without them"
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "$APP_DEB" "$MODELS_DEB" >"$ARTIFACTS/apt-install.log" 2>&1 \
  || { cat "$ARTIFACTS/apt-install.log"; fail "apt-get install"; }
dpkg -L ledgermind ledgermind-models | sort > "$ARTIFACTS/installed-files.txt"
purge() {
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 purge -y -qq ledgermind ledgermind-models >"$ARTIFACTS/apt-purge.log" 2>&1
}
trap 'purge' EXIT

# 4. The real-window scenario against the installed binary, empty home.
EMPTY_HOME=$(mktemp -d /tmp/ledgermind-empty-home.XXXXXX)
result=0
(
  export PATH="$HOME/.cargo/bin:$PATH"
  export HOME="$EMPTY_HOME"
  unset LEDGERMIND_CACHE LEDGERMIND_HOME XDG_DATA_HOME XDG_CONFIG_HOME XDG_CACHE_HOME
  export LEDGERMIND_APP=/usr/bin/ledgermind-desktop LEDGERMIND_E2E_SPECS=app LEDGERMIND_ARTIFACTS="$ARTIFACTS"
  scripts/with-keychain.sh scripts/e2e.sh
) 2>&1 | tee "$ARTIFACTS/e2e-installed.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || result=1
[ "$result" -eq 0 ] || fail "the app scenario against /usr/bin/ledgermind-desktop"
if [ -n "$(find "$EMPTY_HOME" -name '*.gguf' -type f 2>/dev/null)" ]; then
  fail "a model was copied into the home folder (they must be read where they are installed)"
fi
rm -rf "$EMPTY_HOME"

# 5. The window's class against the desktop entry: the installed app on a
# display of its own (no access control, so xprop can read it), empty home.
DISP=:$((90 + RANDOM % 100))
Xvfb "$DISP" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
sleep 1
EMPTY_HOME=$(mktemp -d /tmp/ledgermind-empty-home.XXXXXX)
env -u LEDGERMIND_CACHE -u LEDGERMIND_HOME -u XDG_DATA_HOME -u XDG_CONFIG_HOME HOME="$EMPTY_HOME" DISPLAY="$DISP" \
  WEBKIT_DISABLE_COMPOSITING_MODE=1 scripts/with-keychain.sh /usr/bin/ledgermind-desktop >"$ARTIFACTS/wm-class-app.log" 2>&1 &
app=$!
id=""
for _ in $(seq 1 120); do
  id=$(DISPLAY=$DISP xdotool search --onlyvisible --name '^Ledgermind$' 2>/dev/null | head -1)
  [ -n "$id" ] && break
  sleep 0.5
done
[ -n "$id" ] && DISPLAY=$DISP xprop -id "$id" WM_CLASS > "$ARTIFACTS/wm-class.txt" 2>&1
sleep 8
DISPLAY=$DISP import -window root "$ARTIFACTS/installed-window.png" 2>/dev/null || true
descendants() { local c; for c in $(pgrep -P "$1"); do echo "$c"; descendants "$c"; done; }
for pid in $(descendants "$app"); do
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = /usr/bin/ledgermind-desktop ] && kill -TERM "$pid" 2>/dev/null
done
for _ in $(seq 1 50); do kill -0 "$app" 2>/dev/null || break; sleep 0.2; done
kill "$app" 2>/dev/null; kill "$xvfb" 2>/dev/null; wait "$xvfb" 2>/dev/null
rm -rf "$EMPTY_HOME"
[ -s "$ARTIFACTS/wm-class.txt" ] || fail "the installed app's window did not appear (log: $ARTIFACTS/wm-class-app.log)"
cat "$ARTIFACTS/wm-class.txt"
grep -q "\"$WMCLASS\"" "$ARTIFACTS/wm-class.txt" || fail "StartupWMClass=$WMCLASS does not match the window's $(cat "$ARTIFACTS/wm-class.txt")"
log "the window's WM_CLASS matches StartupWMClass=$WMCLASS; screenshot: $ARTIFACTS/installed-window.png"

# 6. Purge, and nothing left behind.
trap - EXIT
purge || { cat "$ARTIFACTS/apt-purge.log"; fail "apt-get purge"; }
left=()
while read -r f; do
  case "$f" in /usr|/usr/bin|/usr/lib|/usr/share|/usr/share/applications|/usr/share/metainfo|/usr/share/doc|/usr/share/icons*|/.) continue ;; esac
  [ -e "$f" ] && [ ! -d "$f" ] && left+=("$f")
done < "$ARTIFACTS/installed-files.txt"
for d in /usr/share/ledgermind /usr/lib/ledgermind /usr/share/doc/ledgermind /usr/share/doc/ledgermind-models; do
  [ -e "$d" ] && left+=("$d")
done
new=$(find /usr -newer "$STAMP" \( -name '*ledgermind*' \) 2>/dev/null)
[ -n "$new" ] && left+=($new)
rm -f "$STAMP"
[ ${#left[@]} -eq 0 ] || fail "left under /usr after purge: ${left[*]}"
log "purged: nothing of ledgermind left under /usr"
echo "package check: passed"
