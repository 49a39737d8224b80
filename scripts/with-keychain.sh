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
  SCRATCH=$(mktemp -d /tmp/ledgermind-keychain.XXXXXX)
  chmod 700 "$SCRATCH"
  RUN_DIR="$SCRATCH/run" DATA_DIR="$SCRATCH/data"
  if [ -n "${LEDGERMIND_KEYCHAIN_DIR:-}" ]; then
    # gnome-keyring keeps its keyrings in $XDG_DATA_HOME/keyrings.
    mkdir -p "$LEDGERMIND_KEYCHAIN_DIR"
    chmod 700 "$LEDGERMIND_KEYCHAIN_DIR"
    DATA_DIR=$(cd "$LEDGERMIND_KEYCHAIN_DIR" && pwd)
    echo "with-keychain: private keychain kept in $DATA_DIR/keyrings" >&2
  fi
  mkdir -p -m 700 "$RUN_DIR" "$DATA_DIR" "$SCRATCH/services"
  # The private bus starts the keychain itself, unlocked by a throwaway
  # password, whenever its name is free: at the first call and again after
  # a crash. gnome-keyring-daemon has died mid-suite (SIGTRAP) in CI; the
  # stock activation then started a locked one, and every later keychain
  # call failed. Our service directory comes first, so it wins over the
  # system's file for the same name.
  printf 'ledgermind-test' >"$SCRATCH/password"
  cat >"$SCRATCH/keyring" <<EOS
#!/bin/sh
export XDG_RUNTIME_DIR='$RUN_DIR' XDG_DATA_HOME='$DATA_DIR'
echo \$\$ >'$SCRATCH/keyring.pid'
exec gnome-keyring-daemon --foreground --unlock --components=secrets <'$SCRATCH/password' >/dev/null 2>&1
EOS
  chmod 700 "$SCRATCH/keyring"
  printf '[D-BUS Service]\nName=org.freedesktop.secrets\nExec=%s\n' "$SCRATCH/keyring" \
    >"$SCRATCH/services/org.freedesktop.secrets.service"
  cat >"$SCRATCH/bus.conf" <<EOS
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <servicedir>$SCRATCH/services</servicedir>
  <standard_session_servicedirs/>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOS
  export LEDGERMIND_IN_PRIVATE_BUS="$SCRATCH" LEDGERMIND_KEYCHAIN_DATA="$DATA_DIR"
  # The scratch directory goes only once the bus has ended: the bus watches
  # its service directory and would complain to see it vanish.
  trap 'rm -rf "$SCRATCH"' EXIT
  dbus-run-session --config-file="$SCRATCH/bus.conf" -- "$0" "$@"
  exit
fi
SCRATCH=$LEDGERMIND_IN_PRIVATE_BUS
export XDG_RUNTIME_DIR="$SCRATCH/run" XDG_DATA_HOME="$LEDGERMIND_KEYCHAIN_DATA"
trap '[ -s "$SCRATCH/keyring.pid" ] && kill "$(cat "$SCRATCH/keyring.pid")" 2>/dev/null || true' EXIT
dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
  org.freedesktop.DBus.StartServiceByName string:org.freedesktop.secrets uint32:0 >/dev/null 2>&1 || true
# Wait until the keychain owns its bus name before the first real call.
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
