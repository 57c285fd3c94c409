# Convenience targets; the test command itself is scripts/test.sh (CI runs it via .ci/run).
PYTHON ?= python3

.PHONY: test install develop reproduce
test:
	PYTHON=$(PYTHON) ./scripts/test.sh

install:
	$(PYTHON) -m pip install .

develop:
	$(PYTHON) -m pip install -e '.[test]'

reproduce: install
	vcpulab reproduce
