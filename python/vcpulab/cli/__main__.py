"""``python -m vcpulab.cli``: the same as the ``vcpulab`` command."""

from . import exit_with, main

exit_with(main())
