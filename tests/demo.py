"""Where the tests find the real MIMIC-III demo (100 patients, open access): the one setting.

``CET_MIMIC_DEMO_DIR`` names the folder of the demo's ``*.csv.gz`` files and ``SHA256SUMS.txt``
(as published on PhysioNet); unset, the workspace copy beside the repository is used. Without
the demo its tests are skipped on a workstation and fail under CI (``CI`` set), so a CI
machine without the data cannot pass silently.
"""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = Path(os.environ.get("CET_MIMIC_DEMO_DIR") or ROOT.parent / "shared" / "data" / "mimic-iii-demo")
requires_demo = pytest.mark.skipif(not DEMO.is_dir() and not os.environ.get("CI"),
                                   reason=f"the MIMIC-III demo is not at {DEMO} (set CET_MIMIC_DEMO_DIR)")
