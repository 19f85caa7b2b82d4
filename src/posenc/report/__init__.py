"""posenc.report: the self-contained HTML atlas (``posenc report``).

:func:`build_report` writes ``index.html`` with every figure embedded and nothing fetched from
the network; it needs the ``viz`` extra (matplotlib).
"""

from .atlas import Progress, ReportSummary, build_report
from .results import read_results

__all__ = ["Progress", "ReportSummary", "build_report", "read_results"]
