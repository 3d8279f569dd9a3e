"""The named choices of the library's options and the thresholds its reports quote, with no
imports, so that a command line can offer them (and answer ``--help``) before PyTorch or polars
load."""

SPLIT_METHODS = ("random", "hash")  # how a build draws train/val/test: see cet_model.dataset.assign_splits
TABLE_SPLIT_METHODS = (*SPLIT_METHODS, "stratified")  # a table of one's own: also by the observed events
IMPUTE = (None, "median", "median+indicator")  # write_follow_up_dataset's choices for missing feature values
REFERENCE_CHOICES = ("auto", "cox", "none")  # the classical reference fit beside the models
CI_RMST = "ci_rmst"  # Harrell's C of the restricted mean event-free time (later or never)
METRICS = ("auc", "mrae", "ci", "ece", "uno_c", "ibs")  # the paper's tables' columns (and Uno's C, IBS)
REFERENCE = "Cox (reference)"  # the classical reference's row in every table (cet_model.reference)
CI_TIMING = "ci_timing"  # Harrell's C of the predicted time given occurrence, on the rows with the event observed
IMPORTANCE_SCORES = ("auc", CI_RMST, CI_TIMING)
IMPORTANCE_REPEATS = 5  # shuffles per input of permutation importance
# the names of cet_model.presets.PRESETS (the rows of every table), in order, and the paper's comparison
PRESET_NAMES = ("CET", "CET-paper", "CET-bound", "CET-unconditioned", "CET-marginal", "CET-uniform-init", "ET", "BC",
                "Oracle", "CET-Gumbel", "CET-exact", "CET-ARM")
PAPER_PRESETS = ("CET", "CET-paper", "ET", "BC", "Oracle")

# thresholds that evaluation applies and reports quote
BEYOND_SHARE = 0.2  # a share of P(ever) past the training follow-up that reports and scoring logs name
FOLLOWED_ROWS = 10  # the follow-up's end, for P(ever): the last time this many training rows were still followed
RISING_SHARE = 0.1  # Kaplan-Meier still rises at the follow-up's end when its last quarter adds this share of the risk
