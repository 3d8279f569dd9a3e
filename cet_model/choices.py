"""The named choices of the library's options, with no imports, so that a command line can offer
them (and answer ``--help``) before PyTorch or polars load."""

SPLIT_METHODS = ("random", "hash")  # how a build draws train/val/test: see cet_model.dataset.assign_splits
TABLE_SPLIT_METHODS = (*SPLIT_METHODS, "stratified")  # a table of one's own: also by the observed events
IMPUTE = (None, "median", "median+indicator")  # write_follow_up_dataset's choices for missing feature values
REFERENCE_CHOICES = ("auto", "cox", "none")  # the classical reference fit beside the models
CI_RMST = "ci_rmst"  # Harrell's C of the restricted mean event-free time (later or never)
CI_TIMING = "ci_timing"  # Harrell's C of the predicted time given occurrence, on the rows with the event observed
IMPORTANCE_SCORES = ("auc", CI_RMST, CI_TIMING)
IMPORTANCE_REPEATS = 5  # shuffles per input of permutation importance
# the names of cet_model.presets.PRESETS (the rows of every table), in order, and the paper's comparison
PRESET_NAMES = ("CET", "CET-paper", "CET-bound", "CET-unconditioned", "CET-marginal", "CET-uniform-init", "ET", "BC",
                "Oracle", "CET-Gumbel", "CET-exact", "CET-ARM")
PAPER_PRESETS = ("CET", "CET-paper", "ET", "BC", "Oracle")
