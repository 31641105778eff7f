"""The HTML report: every mart, as an accessible static page per question, with the pairs behind each cell.

``render_report(warehouse, out_dir)`` reads a built warehouse (its published
copy when there is one) read-only and writes a folder of self-contained pages;
``ableaudit report`` and the audit flow call it after each publish.
"""

from ableaudit.report.marts import ReportError
from ableaudit.report.render import RenderedReport, default_out_dir, render_report

__all__ = ["RenderedReport", "ReportError", "default_out_dir", "render_report"]
