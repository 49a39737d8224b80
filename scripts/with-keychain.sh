#!/usr/bin/env bash
# Runs a command with a real, unlocked Secret Service keychain. Uses the
# session's keychain when there is one; otherwise (headless machines, CI)
# starts a private D-Bus session with gnome-keyring unlocked by a fixed
# password. Its keyring lives in scratch directories that vanish afterwards,
# unless LEDGERMIND_KEYCHAIN_DIR names a directory to keep it in (mode 0700;
# scripts/run.sh does this): then the signing keys outlive the launch, and
# the same data directory opens again with its keys. The keyring there is
# protected by the directory's permissions, not by a secret password.
set -euo pipefail
if [ -z "${LEDGERMIND_IN_PRIVATE_BUS:-}" ] && [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] \
   && [ -z "${LEDGERMIND_FORCE_PRIVATE_KEYCHAIN:-}" ] \
   && secret-tool search --all service ledgermind >/dev/null 2>&1; then
  exec "$@"
fi
if [ -z "${LEDGERMIND_IN_PRIVATE_BUS:-}" ]; then
  export LEDGERMIND_IN_PRIVATE_BUS=1
  exec dbus-run-session -- "$0" "$@"
fi
SCRATCH=$(mktemp -d /tmp/ledgermind-keychain.XXXXXX)
chmod 700 "$SCRATCH"
export XDG_RUNTIME_DIR="$SCRATCH/run" XDG_DATA_HOME="$SCRATCH/data"
if [ -n "${LEDGERMIND_KEYCHAIN_DIR:-}" ]; then
  # gnome-keyring keeps its keyrings in $XDG_DATA_HOME/keyrings.
  mkdir -p "$LEDGERMIND_KEYCHAIN_DIR"
  chmod 700 "$LEDGERMIND_KEYCHAIN_DIR"
  XDG_DATA_HOME=$(cd "$LEDGERMIND_KEYCHAIN_DIR" && pwd)
  echo "with-keychain: private keychain kept in $XDG_DATA_HOME/keyrings" >&2
fi
mkdir -p -m 700 "$XDG_RUNTIME_DIR" "$XDG_DATA_HOME"
# A throwaway password creates and unlocks the default collection. The
# daemon is restarted, unlocked again, if it dies: in a CI run it once died
# (SIGTRAP) mid-suite, D-Bus then activated a locked one, and every later
# keychain call waited on an unlock prompt nobody could answer.
(
  for _ in $(seq 1 20); do
    printf 'ledgermind-test' | gnome-keyring-daemon --foreground --unlock --components=secrets >/dev/null 2>&1
    [ -e "$SCRATCH/stop" ] && exit 0
    echo "with-keychain: gnome-keyring-daemon exited; restarting it unlocked" >&2
  done
) &
KEYRING_PID=$!
cleanup() {
  touch "$SCRATCH/stop" 2>/dev/null || true
  pkill -P "$KEYRING_PID" 2>/dev/null || true
  kill "$KEYRING_PID" 2>/dev/null || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
# Never call the Secret Service before our daemon owns its bus name: a call
# would make D-Bus activate a second, locked gnome-keyring that can win the name.
for _ in $(seq 1 100); do
  dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
    org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q "boolean true" && break
  sleep 0.05
done
# Ready means the default collection takes a secret, not just that the
# daemon answers: a search succeeds before the login collection exists.
for _ in $(seq 1 100); do
  if printf ready | secret-tool store --label="ledgermind probe" service ledgermind-probe account ready >/dev/null 2>&1 \
     && secret-tool lookup service ledgermind-probe account ready >/dev/null 2>&1; then
    secret-tool clear service ledgermind-probe account ready >/dev/null 2>&1 || true
    break
  fi
  sleep 0.1
done
"$@"
