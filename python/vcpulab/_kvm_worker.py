"""One real-KVM harness run in its own process: ``python -m vcpulab._kvm_worker``.

Reads the harness configuration (JSON) on stdin, writes the result JSON (or
``{"error": ...}``) on stdout; exit status 0 on success, 1 on a failed run. A separate
process keeps the harness's signal handlers, thread policies and any crash away from the
caller.
"""

import sys

from ._native import kvm_run_json


def main() -> int:
    ok, out = kvm_run_json(sys.stdin.read())
    sys.stdout.write(out + "\n")
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
