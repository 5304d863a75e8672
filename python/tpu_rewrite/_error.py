"""The exception the package raises for a bad graph, option or feed."""

from __future__ import annotations

from typing import Any, Dict, List, Optional


class Error(ValueError):
    """A problem tpu-rewrite found in its input.

    ``str(e)`` is the rendered report, as the ``tpu-rewrite`` CLI prints it.
    ``code`` is the first error's code (``"tpu_rewrite::ir::unknown_input"``).
    ``diagnostics`` lists every problem as a dict: ``message``, ``code``,
    ``severity``, ``help``, ``file``, ``line`` and ``column`` (1-based, of
    the first label; None without one) and ``labels`` (each ``text``,
    ``offset``, ``length``, ``line``, ``column``).
    """

    code: Optional[str]
    diagnostics: List[Dict[str, Any]]

    def __init__(self, report: str, code: Optional[str], diagnostics: List[Dict[str, Any]]) -> None:
        super().__init__(report)
        self.report = report
        self.code = code
        self.diagnostics = diagnostics

    def __str__(self) -> str:
        return self.report
