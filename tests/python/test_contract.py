"""The command-line contract (vcpulab_core::contract) as the Python CLI sees it through
the bindings: seed texts read as Python's `int(text, 0)` always read them, errors worded
as before, scenario files read as the API read them. The native command uses the same
functions (tests/python/test_native_cli.py holds the two commands to each other)."""

from __future__ import annotations

import argparse
import ast
import errno
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vcpulab import _native
from vcpulab.cli import _common

REPO = Path(__file__).resolve().parents[2]


def _int_seed(text: str):
    """The seed rule the CLI had before the contract (cli.py's `_seed`): a value, or the
    message of the ArgumentTypeError."""
    try:
        v = int(text, 0)
    except ValueError:
        return f"invalid seed {text!r}: expected a non-negative integer"
    if not 0 <= v < 2**63:
        return f"invalid seed {text!r}: must be in 0..2^63-1"
    return v


def _contract_seed(text: str):
    try:
        return _common.seed(text)
    except argparse.ArgumentTypeError as e:
        return str(e)


SEED_ALPHABET = ("0123456789abcdefxXoObB_+- \t\n\x0b\x0c\r\x1c\x1f\x7f\x85\xa0\u2028\u3000"
                 "\u0660\u0661\u0669\uff10\uff11\U0001d7ce\U0001d7cf.e'\"\\")


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet=SEED_ALPHABET, max_size=12))
def test_seed_texts_read_as_pythons_int_with_base_0(text):
    assert _contract_seed(text) == _int_seed(text)


@pytest.mark.parametrize("text", [
    "0", "00", "0_0", "-0", "+5", " 5 ", "0x_1f", "0o17", "0b101", "1_000", "010", "1__0", "_1", "1_", "",
    "-1", "9223372036854775807", "9223372036854775808", "0x8000000000000000", "١٢", "１２", "\x855",
    "0x", "1e3", "it's", "say \"x\"", "a'b\"c",
])
def test_seed_texts_at_the_edges(text):
    assert _contract_seed(text) == _int_seed(text)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=("Cs", "Cn")), max_size=8))
def test_a_refused_seed_is_quoted_as_python_quotes_it(text):
    """Any text (its characters assigned in this Python's Unicode database)."""
    assert _contract_seed(text) == _int_seed(text)


def test_a_seed_of_undecodable_command_line_bytes_is_quoted_as_python_quotes_it():
    text = b"1\xff".decode("utf-8", "surrogateescape")
    assert _contract_seed(text) == _int_seed(text) == "invalid seed '1\\udcff': expected a non-negative integer"


def test_over_4300_digits_is_out_of_range_not_a_non_integer():
    """Python 3.11 refuses int() of a decimal text over 4,300 digits with a ValueError, which
    the old rule reported as "expected a non-negative integer"; it is an integer, too large."""
    assert _contract_seed("9" * 5000) == f"invalid seed {'9' * 5000!r}: must be in 0..2^63-1"


def _old_os_error_text(e: OSError) -> str:
    """cli.py's `_os_error_message` before the contract."""
    if e.filename is not None and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return str(e)


@pytest.mark.parametrize("exc", [
    FileNotFoundError(errno.ENOENT, "No such file or directory", "a.toml"),
    PermissionError(errno.EACCES, "Permission denied", "/x/y"),
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EIO, ""),
    OSError(errno.EIO, "", "f"),
    OSError("a message alone"),
    OSError(),
    BrokenPipeError(errno.EPIPE, "Broken pipe"),
    OSError(errno.ENOENT, "No such file or directory", "a", None, "b"),
    FileNotFoundError(errno.ENOENT, "No such file or directory", "m\udcff.toml"),  # undecodable bytes
])
def test_os_errors_are_worded_as_before(exc):
    assert _common.os_error_text(exc) == _old_os_error_text(exc)


def test_failures_end_with_the_documented_statuses():
    assert _native.cli_failure("bad-input", "x") == (2, "vcpulab: error: x")
    assert _native.cli_failure("sim-failed", "y") == (1, "vcpulab: error: y")
    assert _native.cli_failure("interrupted") == (130, "vcpulab: interrupted")
    assert _native.cli_failure("closed-output") == (1, None)
    with pytest.raises(ValueError):
        _native.cli_failure("nope")
    assert (_native.EXIT_OK, _native.EXIT_SIM_FAILED, _native.EXIT_BAD_INPUT, _native.EXIT_INTERRUPTED) == (0, 1, 2, 130)
    assert "0 ok, 1 a simulation failed, 2 bad input" in _native.EXIT_STATUS_HELP
    import vcpulab

    assert _native.VERSION_LINE == f"vcpulab {vcpulab.__version__}"


def test_reading_a_scenario_file(tmp_path: Path):
    crlf = tmp_path / "a.TOML"
    crlf.write_bytes(b"a = 1\r\nb = 2\rc = 3\n")
    assert _native.read_scenario_file(crlf) == ("a = 1\nb = 2\nc = 3\n", str(crlf), "toml")
    js = tmp_path / "b.Json"
    js.write_text("{}")
    assert _native.read_scenario_file(str(js)) == ("{}", str(js), "json")
    missing = tmp_path / "nope.toml"
    with pytest.raises(FileNotFoundError) as info:
        _native.read_scenario_file(missing)
    # The path as os.fspath gives it, as open(os.fspath(path)) reported it.
    assert (info.value.errno, info.value.strerror, info.value.filename) == (errno.ENOENT, "No such file or directory",
                                                                            str(missing))
    with pytest.raises(IsADirectoryError):
        _native.read_scenario_file(str(tmp_path))
    with pytest.raises(ValueError, match="embedded null byte"):
        _native.read_scenario_file("a\0b.toml")
    latin1 = tmp_path / "c.toml"
    latin1.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(_native.ScenarioError, match=r"c\.toml: not UTF-8 text \(byte 0xe9 at offset 11\)"):
        _native.read_scenario_file(str(latin1))


# ------------------------------------------------------------------ the CLI package


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import in a module (level: leading dots)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
            if node.level == 1 and not node.module:  # from . import x
                found.extend((1, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            found.extend((0, a.name) for a in node.names)
    return found


def test_the_cli_package_has_no_import_cycle():
    """A module per command and a leaf of shared helpers: a command module imports
    `_common` and the API modules, never the package or a sibling command."""
    package = REPO / "python" / "vcpulab" / "cli"
    from vcpulab import cli

    commands = {f"{name.replace('-', '_')}.py" for name in cli.COMMANDS}
    assert commands <= {p.name for p in package.glob("*.py")}
    for path in sorted(package.glob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        for level, module in _imports(path):
            assert not (level == 0 and module.startswith("vcpulab.cli")), (path.name, module)
            assert level != 2 or module.split(".")[0] != "cli", (path.name, module)
            if level == 1:
                assert path.name != "_common.py", f"_common imports .{module}: it must stay a leaf"
                assert module == "_common", f"{path.name} imports the sibling .{module}"
    # Nothing outside the package reaches into it but its entry points.
    for path in sorted((REPO / "python" / "vcpulab").glob("*.py")):
        for level, module in _imports(path):
            if (level == 1 and module.startswith("cli")) or module.startswith("vcpulab.cli"):
                assert path.name == "__main__.py", (path.name, module)
