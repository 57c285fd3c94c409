"""``vcpulab report``: a self-contained HTML report (inline SVG plots) of a sweep, a
``run --out`` or a ``reproduce --out`` folder."""

from __future__ import annotations

import argparse
import os

from ._common import EXIT_OK, RAW, err

REPORT_EPILOG = """\
examples:
  vcpulab report results/                 a sweep: metric-vs-axis plots with 95% CIs
  vcpulab run s.toml --out one/ && vcpulab report one/      a single run
  vcpulab reproduce --all --out repro/ && vcpulab report repro/   paper vs vcpulab

Writes DIR/report.html: one self-contained file (inline SVG plots, no network).
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="write a self-contained HTML report with plots", epilog=REPORT_EPILOG,
                       formatter_class=RAW,
                       description="Write DIR/report.html for a sweep folder, a `run --out` folder or a "
                                   "`reproduce --out` folder.")
    r.add_argument("dir", metavar="DIR", help="results folder")
    r.add_argument("--output", metavar="FILE", help="where to write the page (default: DIR/report.html)")
    r.add_argument("--open", action="store_true", help="open the page in a web browser")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from ..report import write_report

    path = write_report(args.dir, args.output)
    err(f"vcpulab: wrote {path}")
    if args.open:
        import pathlib
        import webbrowser

        url = pathlib.Path(os.path.abspath(path)).as_uri()
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            # Without a display or a configured browser, webbrowser.open does nothing and
            # says so only by returning False: tell the user where the page is.
            why = ""
            if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("BROWSER")):
                why = " (no display, and $BROWSER is not set)"
            err(f"vcpulab: no web browser could be opened{why}; the report is {os.path.abspath(path)} "
                f"(open {url} in a browser)")
    return EXIT_OK
