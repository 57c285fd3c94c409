"""``python -m vcpulab``: the same as the ``vcpulab`` command."""

from .cli import exit_with, main

exit_with(main())
