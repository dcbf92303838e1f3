"""The report pages' HTML, rendered from the Jinja2 templates in analysis/reports/templates/: `render`
for both pages (the sweep page is analysis/reports/sweep_page.py's, the per-run page
analysis/reports/run_report.py's). One self-contained file each; numbers are for people
(analysis/reports/fmt.py).

The environment escapes every value a template prints (autoescape: scenario and sweep names,
parameter keys, run ids, errors and reasons are user input), so nothing here escapes by hand: the
functions below pass plain text, and the markup lives only in the templates. A name a template
uses that its caller did not pass is an error (StrictUndefined), never an empty string.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2

TEMPLATES = Path(__file__).with_name("templates")  # shipped as package data (pyproject.toml)
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                         undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                         keep_trailing_newline=True)
ENV.filters["thousands"] = lambda n: f"{n:,}"  # 12,345 (an int as it is; fmt.count for counts that may be None)


def render(template: str, **values: Any) -> str:
    """The page of `template` (a file in analysis/reports/templates/) with `values`, escaped."""
    return ENV.get_template(template).render(**values)
