"""What importing a module really loads, asked of an interpreter that has loaded nothing yet."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence


def modules_loaded_by(import_statement: str, top_level: Sequence[str]) -> list[str]:
    """The modules under the ``top_level`` packages that ``import_statement`` loads in a fresh
    interpreter (``-I``, isolated mode: no site customisation or PYTHONSTARTUP can pre-load,
    or hide, modules), sorted."""
    probe = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"{import_statement}\n"
        "loaded = set(sys.modules) - before\n"
        f"print(json.dumps(sorted(n for n in loaded if n.split('.')[0] in {tuple(top_level)!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(result.stdout)
    return loaded
