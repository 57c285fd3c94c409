"""A local sweep worker: ``python -m vcpulab._worker`` (started by :mod:`vcpulab.sweep`)."""

from .sweep import worker_loop

if __name__ == "__main__":
    worker_loop()
