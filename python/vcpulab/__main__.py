"""``python -m vcpulab``: the same as the ``vcpulab`` command."""

from .cli import main

raise SystemExit(main())
