#!/usr/bin/env bash
# Builds the Debian packages, offline, with dpkg-deb:
#   ledgermind_<version>_amd64.deb       the desktop app and the command line
#   ledgermind-models_<version>_all.deb  the default models (/usr/share/ledgermind/models),
#                                         so the app answers, listens and speaks offline
# into dist/ (or $LEDGERMIND_DIST). The debug build by default (what the tests
# build, so nothing is compiled twice); --release for the release profile.
# The models come from scripts/setup.sh's cache (run first, idempotently).
# LEDGERMIND_PACKAGE_NO_BUILD=1 packages the binaries already built.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PROFILE=debug
[ "${1:-}" = "--release" ] && PROFILE=release
log() { printf '\033[1;34m[package]\033[0m %s\n' "$*"; }

VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
[ -n "$VERSION" ] || { echo "package: no version in Cargo.toml" >&2; exit 1; }
MAINTAINER="Ledgermind maintainers <maintainers@users.noreply.a-seed-326ca86f.example>"
DIST="${LEDGERMIND_DIST:-$ROOT/dist}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE"
CACHE="${LEDGERMIND_CACHE:-$HOME/.cache/ledgermind}"
MODELS="$CACHE/models"

for tool in dpkg-deb dpkg-shlibdeps convert; do
  command -v "$tool" >/dev/null || { echo "package: $tool is missing (apt-get install dpkg-dev imagemagick)" >&2; exit 1; }
done

if [ "${LEDGERMIND_PACKAGE_NO_BUILD:-}" != 1 ]; then
  scripts/setup.sh
  (cd ui && npm run --silent build)
  if [ "$PROFILE" = release ]; then
    cargo build --release -p ledgermind-desktop -p cli
  else
    # The test build's feature set: reuses what scripts/test.sh compiled.
    cargo build --workspace --all-targets
  fi
fi
for b in ledgermind-desktop ledgermind; do
  [ -x "$TARGET/$b" ] || { echo "package: $TARGET/$b is missing: build it first" >&2; exit 1; }
done

WORK=$(mktemp -d /tmp/ledgermind-package.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DIST"

# Files the documentation of each package needs: copyright and a changelog.
doc_files() { # stage package copyright-file
  local d="$1/usr/share/doc/$2"
  install -d "$d"
  install -m 0644 "$3" "$d/copyright"
  printf '%s (%s) unstable; urgency=medium\n\n  * Built from the Ledgermind source (%s).\n\n -- %s  %s\n' \
    "$2" "$VERSION" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$MAINTAINER" \
    "$(date -R -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")" \
    | gzip -9n > "$d/changelog.gz"
  chmod 0644 "$d/changelog.gz"
}

# Control file, md5sums and the package itself.
build_deb() { # stage package arch depends recommends description-file out
  local stage=$1 pkg=$2 arch=$3 depends=$4 recommends=$5 desc=$6 out=$7
  install -d "$stage/DEBIAN"
  {
    echo "Package: $pkg"
    echo "Version: $VERSION"
    echo "Architecture: $arch"
    echo "Maintainer: $MAINTAINER"
    echo "Installed-Size: $(du -sk --exclude=DEBIAN "$stage" | cut -f1)"
    [ -n "$depends" ] && echo "Depends: $depends"
    [ -n "$recommends" ] && echo "Recommends: $recommends"
    echo "Section: $( [ "$arch" = all ] && echo misc || echo utils)"
    echo "Priority: optional"
    cat "$desc"
  } > "$stage/DEBIAN/control"
  (cd "$stage" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) > "$stage/DEBIAN/md5sums"
  chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"
  find "$stage" -type d -exec chmod 0755 {} +
  # Quantised weights barely compress: the fastest gzip for the models
  # (lintian refuses zstd and uncompressed members; xz takes minutes).
  local z=(-Zxz)
  [ "$arch" = all ] && z=(-Zgzip -z1)
  dpkg-deb --root-owner-group "${z[@]}" --build "$stage" "$out" >/dev/null
  log "built $out ($(du -h "$out" | cut -f1))"
}

# --- ledgermind (app + CLI) ------------------------------------------------
APP="$WORK/app"
install -d "$APP/usr/bin" "$APP/usr/share/applications" "$APP/usr/share/metainfo" "$APP/usr/lib/ledgermind/models/onnxruntime"
for b in ledgermind-desktop ledgermind; do
  install -m 0755 "$TARGET/$b" "$APP/usr/bin/$b"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$APP/usr/bin/$b"
done
# ONNX Runtime is loaded at run time by the voice models (arch-dependent, so
# here rather than in the models package); the app looks in
# /usr/lib/ledgermind/models after the person's models folder.
if [ -f "$MODELS/onnxruntime/libonnxruntime.so" ]; then
  install -m 0644 "$MODELS/onnxruntime/libonnxruntime.so" "$APP/usr/lib/ledgermind/models/onnxruntime/libonnxruntime.so"
  strip --strip-unneeded --remove-section=.comment --remove-section=.note "$APP/usr/lib/ledgermind/models/onnxruntime/libonnxruntime.so"
fi
# The window's WM_CLASS: GTK takes it from the program's name (res_class
# capitalised); the desktop entry must name it for docks to match the window.
sed "s/@WMCLASS@/${LEDGERMIND_WMCLASS:-Ledgermind-desktop}/" packaging/ledgermind.desktop > "$APP/usr/share/applications/ledgermind.desktop"
sed -e "s/@VERSION@/$VERSION/" -e "s/@DATE@/$(date -u -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)" +%F)/" \
  packaging/app.ledgermind.desktop.metainfo.xml > "$APP/usr/share/metainfo/app.ledgermind.desktop.metainfo.xml"
chmod 0644 "$APP/usr/share/applications/ledgermind.desktop" "$APP/usr/share/metainfo/app.ledgermind.desktop.metainfo.xml"
for s in 16 24 32 48 64 128 256 512; do
  install -d "$APP/usr/share/icons/hicolor/${s}x${s}/apps"
  convert icons/icon.png -resize "${s}x${s}" -strip "PNG32:$APP/usr/share/icons/hicolor/${s}x${s}/apps/ledgermind.png"
  chmod 0644 "$APP/usr/share/icons/hicolor/${s}x${s}/apps/ledgermind.png"
done
doc_files "$APP" ledgermind packaging/copyright

# Depends: the shared libraries the binaries link (dpkg-shlibdeps), plus what
# is loaded or started at run time: the tray's indicator library (dlopen'd),
# espeak-ng (the voices' phonemes and the fallback voice), D-Bus for the
# keychain and the single-instance hand-over.
mkdir -p "$WORK/shlibs/debian"
printf 'Source: ledgermind\n\nPackage: ledgermind\nArchitecture: amd64\n' > "$WORK/shlibs/debian/control"
SHLIB_ARGS=(-e"$APP/usr/bin/ledgermind-desktop" -e"$APP/usr/bin/ledgermind")
[ -f "$APP/usr/lib/ledgermind/models/onnxruntime/libonnxruntime.so" ] && SHLIB_ARGS+=(-e"$APP/usr/lib/ledgermind/models/onnxruntime/libonnxruntime.so")
SHLIBS=$(cd "$WORK/shlibs" && dpkg-shlibdeps -O "${SHLIB_ARGS[@]}" 2>"$WORK/shlibdeps.err" | sed -n 's/^shlibs:Depends=//p') \
  || { cat "$WORK/shlibdeps.err" >&2; exit 1; }
# -z pack-relative-relocs (src-tauri/build.rs) needs the loader of glibc 2.36.
if objdump -p "$APP/usr/bin/ledgermind-desktop" | grep -q GLIBC_ABI_DT_RELR && ! grep -q 'libc6 (>= 2.3[6-9]' <<<"$SHLIBS"; then
  SHLIBS=$(sed 's/libc6 (>= [0-9.]*)/libc6 (>= 2.36)/' <<<"$SHLIBS")
fi
DEPENDS="$SHLIBS, libayatana-appindicator3-1, espeak-ng, dbus"
cat > "$WORK/app.desc" <<'EOF'
Description: local-first AI companions with a signed memory ledger
 Ledgermind keeps AI companions on your own computer: every message, memory
 and decision goes into a signed, append-only ledger you can verify, export
 and restore. Replies come from a local model on the CPU, so it works
 offline; the default models are in the ledgermind-models package.
 .
 This package holds the desktop app (ledgermind-desktop, with a tray icon and
 a document library) and the command line (ledgermind). It needs an x86-64
 CPU with AVX2 (x86-64-v3) and glibc 2.36 or newer (Debian 12, Ubuntu 24.04).
EOF
build_deb "$APP" ledgermind amd64 "$DEPENDS" "ledgermind-models, gnome-keyring, gnome-shell-extension-appindicator" \
  "$WORK/app.desc" "$DIST/ledgermind_${VERSION}_amd64.deb"

# --- ledgermind-models -------------------------------------------------------
MOD="$WORK/models"
install -d "$MOD/usr/share/ledgermind/models"
DEFAULT_MODELS=(qwen2.5-coder-1.5b-instruct-q4_k_m.gguf SmolLM2-135M-Instruct.Q4_1.gguf all-MiniLM-L6-v2 guard-classifier-v2.bin
  whisper-tiny.en whisper-base silero-vad piper-en_US-joe-medium)
for m in "${DEFAULT_MODELS[@]}"; do
  [ -e "$MODELS/$m" ] || { echo "package: $MODELS/$m is missing: run scripts/setup.sh" >&2; exit 1; }
  # Hard links where the disk allows: nothing is copied to stage a gigabyte.
  cp -rl "$MODELS/$m" "$MOD/usr/share/ledgermind/models/$m" 2>/dev/null || cp -r "$MODELS/$m" "$MOD/usr/share/ledgermind/models/$m"
done
doc_files "$MOD" ledgermind-models packaging/copyright-models
cat > "$WORK/models.desc" <<'EOF'
Description: default models for Ledgermind
 The models Ledgermind uses by default, so that it answers, listens and
 speaks offline from its first start: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)
 and SmolLM2-135M-Instruct for replies, all-MiniLM-L6-v2 for memory and
 document search, Whisper tiny.en and base for speech, Silero VAD, the Piper
 voice en_US-joe-medium, and the prompt-injection guard's classifier.
 .
 The app reads them in place, memory-mapped and read-only; models a person
 adds go to their own data folder and take precedence.
EOF
# Staged as root-owned, world-readable files whatever the cache's modes were.
(cd "$MOD/usr/share/ledgermind/models" && find . -type f -exec chmod 0644 {} +)
build_deb "$MOD" ledgermind-models all "" "" "$WORK/models.desc" "$DIST/ledgermind-models_${VERSION}_all.deb"
