"""Image-quality report of int8attn's precision modes on a small trained diffusion model.

Thin entry point: the code lives in bench/quality/ (model.py, train.py, report.py); see
docs/quality.md. Example:

    python bench/quality.py --device cuda --out bench/results/<date>-<gpu>-quality
"""

import sys
from pathlib import Path

# bench/quality/ holds flat modules (model, metrics, imaging, report); put it first on the path.
sys.path.insert(0, str(Path(__file__).resolve().parent / "quality"))

import report  # noqa: E402

if __name__ == "__main__":
    sys.exit(report.main())
