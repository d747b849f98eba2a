"""A pytest plugin that plants one bug before any bench is imported (issue 26's catalogue).

Loaded with ``-p planted_plugin`` (``tests/planted`` on ``PYTHONPATH``); the bug is named by
``$NPUBENCH_PLANTED`` and looked up in the ``BUGS`` dicts of ``tests/planted/bugs_*.py``. A bug
is a function that patches the simulator (or a bench) in this process; it runs once, at
plugin import, which is before pytest imports the bench modules. Run the gate with ``-n 0`` so
the patch is in the process that simulates.
"""

from __future__ import annotations

import os

from bugs_registry import all_bugs

_name = os.environ.get("NPUBENCH_PLANTED", "")
if _name:
    bugs = all_bugs()
    if _name not in bugs:
        raise SystemExit(f"NPUBENCH_PLANTED={_name!r}: no such planted bug (known: {sorted(bugs)})")
    bugs[_name]()
