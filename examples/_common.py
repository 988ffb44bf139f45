"""What every example does with its results: the output folder, a headless pyplot, the figure and JSON."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def output_dir(arg: str | None) -> Path:
    """``--out``, else ``$PBF_EXAMPLES_OUT``, else ``<tmp>/pbframework_examples``; created if missing."""
    out = Path(arg or os.environ.get("PBF_EXAMPLES_OUT") or Path(tempfile.gettempdir()) / "pbframework_examples")
    out.mkdir(parents=True, exist_ok=True)
    return out


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, png: Path, json_path: Path, data: Any) -> Path:
    """Lay out, write and close ``fig`` as ``png``; write ``data`` as JSON to ``json_path``. Returns ``png``."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)
    json_path.write_text(json.dumps(data, indent=2))
    return png
