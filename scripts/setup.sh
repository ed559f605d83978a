#!/usr/bin/env bash
# Set kemu up on a fresh Debian machine with Python 3.11: a virtualenv in .venv with kemu
# and its test dependencies. Idempotent and quick when nothing changed. Sourced by the
# quick-start and test scripts; usable on its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "kemu needs Python >= 3.11 as '$PY' (set PYTHON=/path/to/python3.11)" >&2
    exit 1
fi

apt_install() {
    # Debian packages the project needs; only possible as root (CI and fresh machines are).
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    else
        echo "kemu setup needs the Debian packages: $* (run as root, or install them)" >&2
        return 1
    fi
}

if [ ! -x .venv/bin/python ]; then
    if ! "$PY" -m venv .venv >/dev/null 2>&1; then
        # Debian ships venv/ensurepip separately from the interpreter.
        rm -rf .venv
        ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
        apt_install "python${ver}-venv" || apt_install python3-venv
        "$PY" -m venv .venv
    fi
fi

# Debian packages the tests use for real: Prometheus scrapes a running kemu, Chromium opens the
# HTML report. Installed once; KEMU_SKIP_APT=1 skips them (then those tests fail, loudly).
debs=()
command -v prometheus >/dev/null 2>&1 || debs+=(prometheus)
command -v chromium >/dev/null 2>&1 || debs+=(chromium)
if [ "${#debs[@]}" -gt 0 ] && [ "${KEMU_SKIP_APT:-0}" != 1 ]; then
    echo "kemu setup: installing Debian packages: ${debs[*]}" >&2
    apt_install "${debs[@]}"
fi

# Reinstall only when the dependency list changed.
stamp=.venv/.kemu-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "kemu setup: installing kemu and its dependencies into .venv (log: .venv/install.log)" >&2
    if ! { .venv/bin/python -m pip install --disable-pip-version-check --upgrade pip &&
           .venv/bin/python -m pip install --disable-pip-version-check -e ".[test]"; } > .venv/install.log 2>&1; then
        tail -n 30 .venv/install.log >&2
        echo "kemu setup: pip install failed; the whole log is in .venv/install.log" >&2
        exit 1
    fi
    echo "$want" > "$stamp"
fi
