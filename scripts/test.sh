#!/usr/bin/env bash
# The whole test suite, from a fresh clone:
#   1. install the package (Rust extension + Python) with its test extra into the current Python,
#   2. the Rust tests of the core, the KVM harness and the native `vcpulab` command,
#   3. the Python tests.
# Every stage runs even if an earlier test stage fails; the exit status is non-zero if any
# failed. Set PYTHON to choose the interpreter (default: python3, else python).
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
failed=()

echo "==> installing vcpulab with the test extra ($PYTHON -m pip install -e '.[test]')"
if ! "$PYTHON" -m pip install --quiet --disable-pip-version-check -e '.[test]'; then
    echo "test.sh: installing the package failed" >&2
    exit 1
fi

echo "==> Rust tests (cargo test -p vcpulab-core --no-fail-fast)"
cargo test -p vcpulab-core --no-fail-fast || failed+=("cargo test -p vcpulab-core")

echo "==> Rust tests of the KVM harness (cargo test -p vcpulab-kvm)"
cargo test -p vcpulab-kvm --no-fail-fast || failed+=("cargo test -p vcpulab-kvm")

echo "==> Rust tests of the vcpulab command (cargo test -p vcpulab-cli)"
cargo test -p vcpulab-cli --no-fail-fast || failed+=("cargo test -p vcpulab-cli")

echo "==> Python tests (pytest tests/python)"
"$PYTHON" -m pytest tests/python -q || failed+=("pytest tests/python")

if ((${#failed[@]})); then
    echo "test.sh: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "test.sh: all tests passed"
