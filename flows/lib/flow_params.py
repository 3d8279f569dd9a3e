"""One typed parameter model per flow (pydantic): what a deployment run, a CLI or a test passes.

Each flow takes a single ``params`` argument of its model, so a run is validated before any
work starts (an unknown field, a bad month or a negative scale is an error naming the field),
the Prefect UI shows a typed form, and the CLI and the deployments build the same object.
Fields left ``None`` fall back to the settings (``CET_*``) when the flow runs.

    >>> MimicBuildParams(mimic_dir="/data/mimic", n_chart=40).build_params().n_chart
    40
    >>> RedditBuildParams(comment_end="2017-13")
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for RedditBuildParams
    comment_end
      String should match pattern '^\\d{4}-(0[1-9]|1[0-2])$' ...

From a deployment: ``prefect deployment run build-mimic-features/build-mimic-features
--param params='{"mimic_dir": "/data/mimic"}'``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cet_model.choices import REFERENCE_CHOICES, TABLE_SPLIT_METHODS
from flows.lib.choices import (
    DEMO_URL,
    EMBEDDING_MODEL,
    EVIDENCE,
    METRIC_DIRECTION,
    MIMIC_STANDIN_SCALE,
    REDDIT_STANDIN_USERS,
    RMST_NEEDS_HORIZONS,
    SYNTHETIC_MODES,
)
from flows.lib.infra.settings import DATASET_NAME, check_device

MONTH = r"^\d{4}-(0[1-9]|1[0-2])$"
NAME = DATASET_NAME  # --dataset everywhere: a name (models/<name>/, $CET_DATA_DIR/<name>)
DATASETS = ("synthetic", "mimic", "reddit")
PROMOTE_METRICS = tuple(METRIC_DIRECTION)
SEED = "training seed (default: $CET_SEED or 0)"
PROMOTE_METRIC = "validation metric of CET that decides promotion (default: $CET_PROMOTE_METRIC or val_auc)"
PROMOTE_TOLERANCE = "how much worse a new version may be and still be promoted (default: $CET_PROMOTE_TOLERANCE or 0)"
PROMOTE_EVIDENCE = ("point: compare the two values; not-worse: promote unless the paired 95% interval of the "
                    "difference shows the new version worse; better: only when it shows it better (AUC and C; "
                    "default: $CET_PROMOTE_EVIDENCE or point)")


class FlowParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # the fields that name files or folders: a run started through the served API may only name
    # paths inside the configured folders (flows.lib.infra.served.confine)
    PATHS: ClassVar[tuple[str, ...]] = ()


def recipe(params: FlowParams, paths: tuple[str, ...] = (), out=None) -> dict:
    """What retrain (and the full pipeline) need to rebuild a folder the way it was built:
    ``params`` as given (a field left to its setting stays unset, so the setting applies again:
    an ``out`` left unset stays the default folder of ``CET_DATA_DIR``), with the local paths in
    ``out`` and the fields ``paths`` made absolute (a rebuild may run from another folder); URLs
    are kept. ``out``, given, is recorded in place of ``params.out``.

    >>> recipe(SyntheticParams(n=500))
    {'out': None, 'mode': None, 'n': 500, 'seed': 0}
    >>> recipe(SyntheticParams(out="/data/synthetic"))["out"]
    '/data/synthetic'
    """
    def absolute(value):
        if value is None or (isinstance(value, str) and value.startswith(("http://", "https://"))):
            return value
        return [absolute(v) for v in value] if isinstance(value, list) else str(Path(value).resolve())

    given = params.model_dump() | ({"out": str(out)} if out is not None else {})
    return given | {k: absolute(given[k]) for k in (*paths, "out")}


def recorded_params(folder, stage: str, cls: type[FlowParams]) -> FlowParams | None:
    """The parameters that built ``folder`` in ``stage`` (its stamp's recipe), or None: no
    complete build of that stage there, or one from before recipes were recorded."""
    from flows.lib.infra import stage_cache  # here: the options parse before the flows' libraries load

    info = stage_cache.recorded(folder, stage)
    return cls(**info["recipe"]) if info and "recipe" in info else None


class SyntheticParams(FlowParams):
    """build-synthetic: the paper's synthetic data."""

    PATHS: ClassVar[tuple[str, ...]] = ("out",)

    out: str | None = Field(None, description="dataset folder (default: $CET_DATA_DIR/synthetic)")
    mode: Literal[SYNTHETIC_MODES] | None = Field(  # type: ignore[valid-type]
        None, description="reference (the original code's generator) or independent "
                          "(default: $CET_SYNTHETIC_MODE or reference)")
    n: int | None = Field(None, ge=100, description="rows, split 60/20/20 (default: $CET_SYNTHETIC_N or 40000, "
                                                    "the paper's)")
    seed: int = Field(0, ge=0, description="generator and censoring seed")


class MimicBuildParams(FlowParams):
    """build-mimic-features: MIMIC-III tables -> the dataset folder."""

    PATHS: ClassVar[tuple[str, ...]] = ("out", "mimic_dir", "work_dir")

    out: str | None = Field(None, description="dataset folder (default: $CET_DATA_DIR/mimic)")
    mimic_dir: str | None = Field(None, description="folder with ADMISSIONS, CHARTEVENTS, ... as .csv or .csv.gz "
                                                     "(default: $CET_MIMIC_DIR, else a generated stand-in, see "
                                                     "standin_scale)")
    download_demo_url: str | None = Field(None, description=f"fetch and verify the open demo from this URL (on the "
                                                             f"command line --download-demo, default {DEMO_URL})")
    work_dir: str | None = Field(None, description="staged tables and scratch (default: a hidden folder beside the "
                                                   "output)")
    window_hours: int = Field(24, ge=1, le=24 * 14, description="feature window after the origin, in hours")
    n_chart: int = Field(80, ge=0, description="chart items kept (by row count on training admissions)")
    n_lab: int = Field(30, ge=0, description="lab items kept")
    n_output: int = Field(10, ge=0, description="output items kept")
    split_seed: int = Field(0, ge=0, description="seed of the 60/20/20 split")
    split_method: Literal["random", "hash"] = Field("random", description=(
        "random: a seeded permutation, exact shares; hash: each patient keeps its split when the cohort grows "
        "(shares in expectation)"))
    censor_seed: int = Field(0, ge=0, description="seed of the artificial censoring")
    memory_limit: str = Field("2500MB", pattern=r"^\d+(\.\d+)?\s*[KMGT]i?B$", description="DuckDB memory limit")
    window_events: Literal["keep", "mask"] = Field("keep", description="events inside the feature window: keep "
                                                                       "them (the reference) or mask that task")
    standin_scale: float | None = Field(None, gt=0, le=1, description=f"stand-in size as a fraction of the full "
                                                                      f"release (default: $CET_MIMIC_STANDIN_SCALE "
                                                                      f"or {MIMIC_STANDIN_SCALE})")
    standin_seed: int = Field(0, ge=0, description="seed of the generated stand-in")

    @model_validator(mode="after")
    def _one_source(self):
        if self.mimic_dir and self.download_demo_url:
            raise ValueError("give mimic_dir or download_demo_url, not both")
        return self

    def build_params(self):
        """The build's own parameters (``MimicParams``: what enters the dataset and its stage key)."""
        from flows.lib.mimic.build import MimicParams

        return MimicParams(window_hours=self.window_hours, n_chart=self.n_chart, n_lab=self.n_lab,
                           n_output=self.n_output, split_seed=self.split_seed, censor_seed=self.censor_seed,
                           memory_limit=self.memory_limit, window_events=self.window_events,
                           split_method=self.split_method)


class RedditBuildParams(FlowParams):
    """build-reddit-features: Pushshift dumps -> the dataset folder."""

    PATHS: ClassVar[tuple[str, ...]] = ("out", "dumps", "work_dir", "embedding_cache", "model")

    out: str | None = Field(None, description="dataset folder (default: $CET_DATA_DIR/reddit)")
    dumps: str | list[str] | None = Field(None, description="folders holding RC_/RS_YYYY-MM dumps, searched "
                                                            "recursively (the archive's reddit/comments + "
                                                            "reddit/submissions layout, month folders or flat), or "
                                                            "one base URL (default: $CET_REDDIT_DUMPS, else "
                                                            "generated stand-in dumps)")

    @model_validator(mode="after")
    def _one_url(self):
        if isinstance(self.dumps, list) and any(d.startswith(("http://", "https://")) for d in self.dumps):
            raise ValueError("dumps: a base URL must be given alone, not with other sources")
        return self
    work_dir: str | None = Field(None, description="scans, embeddings and scratch (default: a hidden folder beside "
                                                   "the output)")
    start: str | None = Field(None, pattern=MONTH, description="first month read, YYYY-MM (default: all)")
    comment_end: str = Field("2017-11", pattern=MONTH, description="last comment month, YYYY-MM (default 2017-11, "
                                                                   "the paper's)")
    submission_end: str = Field("2020-01", pattern=MONTH, description="last submission month, YYYY-MM (default "
                                                                      "2020-01, the paper's)")
    standin_users: int | None = Field(None, ge=10, description=f"stand-in users (default: $CET_REDDIT_STANDIN_USERS "
                                                               f"or {REDDIT_STANDIN_USERS})")
    standin_seed: int = Field(0, ge=0, description="seed of the generated stand-in dumps")
    standin_text: Literal["phrases", "realistic"] | None = Field(
        None, description="stand-in comment text: short topical phrases, or real length and almost no repeats "
                          "(default: $CET_REDDIT_STANDIN_TEXT or phrases)")
    model: str | None = Field(None, description=f"sentence-transformers model name or folder "
                                                f"(default: $CET_EMBEDDING_MODEL or {EMBEDDING_MODEL})")
    device: str | None = Field(None, description="auto, cpu or cuda (default: $CET_DEVICE or auto)")

    @field_validator("device")
    @classmethod
    def _device(cls, v: str | None) -> str | None:
        return None if v is None else check_device(v, "device")
    split_seed: int = Field(0, ge=0, description="seed of the 60/20/20 split")
    split_method: Literal["random", "hash"] = Field("random", description=(
        "random: a seeded permutation, exact shares; hash: each user keeps its split when the set of users grows "
        "(shares in expectation)"))
    censor_seed: int = Field(0, ge=0, description="seed of the artificial censoring")
    max_error_rate: float = Field(0.01, ge=0, le=1, description="malformed-line share that fails a file")
    embedding_cache: str | None = Field(None, description="reusable embedding cache (default: $CET_EMBEDDING_CACHE)")


class TableBuildParams(FlowParams):
    """build-table-dataset: a table of your own (a row per subject, follow-up time and indicator
    per event, censored by follow-up; no true occurrence) -> the dataset folder."""

    PATHS: ClassVar[tuple[str, ...]] = ("table", "out")

    table: str = Field(description="a .csv, .tsv (either may end in .gz), Stata .dta or parquet file, "
                                   "one row per subject")
    name: str = Field(pattern=NAME, description="the dataset's name: models/<name>/, $CET_DATA_DIR/<name>")
    events: dict[str, tuple[str, str]] = Field(min_length=1, description=(
        "per event its time column and its 0/1 indicator column (1 = seen at that time, 0 = follow-up ended "
        "without it), or COLUMN:CODE for a status column that codes the kind of event (1 where it holds CODE, "
        "0 where it holds another value: censored, or another event, which ends this one's follow-up): "
        "{event: [time, indicator]}; on the command line --event NAME=TIME,INDICATOR, repeated"))
    time_unit: str = Field(min_length=1, description="unit of the time columns, e.g. days")
    features: list[str] | None = Field(None, min_length=1, description="numeric feature columns (default: every "
                                       "column not named by the events, id_column, split_column or group_column)")
    out: str | None = Field(None, description="dataset folder (default: $CET_DATA_DIR/<name>)")
    id_column: str | None = Field(None, min_length=1, description="unique subject ids (default: the row number)")
    split_column: str | None = Field(None, min_length=1, description="train/val/test per row (default: a seeded "
                                                                     "60/20/20 split)")
    group_column: str | None = Field(None, min_length=1, description="draw the seeded split by groups, e.g. a "
                                     "patient id when a patient has several rows: no group in two splits")
    seed: int = Field(0, ge=0, description="seed of the 60/20/20 split")
    split_method: Literal[TABLE_SPLIT_METHODS] = Field("random", description=(  # type: ignore[valid-type]
        "random: a seeded permutation with exact 60/20/20 shares (default); hash: each id (or group) keeps its split "
        "when the table grows and is rebuilt (shares in expectation); stratified: the rows (groups) with each "
        "combination of observed events spread 60/20/20 over the splits, for a rare outcome"))
    impute: Literal["median", "median+indicator"] | None = Field(
        None, description="missing feature values: refused (default: a missing value is an error naming its row), "
                          "or filled with the training rows' median (recorded; predict fills new rows the same "
                          "way); median+indicator also adds a 0/1 column <column>_missing after each column with a "
                          "training gap")
    categorical: list[str] = Field([], description="feature columns (text or codes) encoded as one 0/1 column per "
                                                   "level seen in training (predict encodes new rows the same way); "
                                                   "default: none, and a text column is an error")
    missing_times: Literal["refuse", "mask"] = Field("refuse", description="a missing follow-up time (its indicator "
                                                     "missing or 0): refused (default), or that event left out for "
                                                     "that row (counted)")


class TrainEvaluateParams(FlowParams):
    """train-evaluate: a dataset folder -> a registered, judged model version."""

    PATHS: ClassVar[tuple[str, ...]] = ("data",)

    dataset: str | None = Field(None, pattern=NAME, description="the dataset's name: its models are registered "
                                "under models/<name>/ (default: $CET_RETRAIN_DATASET)")
    data: str | None = Field(None, description="the dataset folder (default: $CET_DATA_DIR/<dataset>)")
    models: list[str] | None = Field(None, description="presets to train (default: CET, ET, BC, and the "
                                                       "Oracle on data with the true occurrence; CET and ET "
                                                       "on data without it; CET-paper when named)")
    hidden: int | None = Field(None, ge=1, description="hidden width (default: $CET_HIDDEN or 100)")
    max_epochs: int | None = Field(None, ge=1, description="epoch cap (default: $CET_MAX_EPOCHS, else automatic)")
    patience: int | None = Field(None, ge=1, description="epochs without a better validation loss before a fit "
                                                         "stops (default: $CET_PATIENCE, else automatic)")
    seed: int | None = Field(None, ge=0, description=SEED)
    promote_metric: Literal[PROMOTE_METRICS] | None = Field(None, description=PROMOTE_METRIC)  # type: ignore
    promote_tolerance: float | None = Field(None, ge=0, description=PROMOTE_TOLERANCE)
    promote_evidence: Literal[EVIDENCE] | None = Field(None, description=PROMOTE_EVIDENCE)  # type: ignore
    runs: int = Field(0, ge=0, description="also write the paper-format report over this many seeds")
    search: int = Field(0, ge=0, description="random-search trials for CET before those runs")
    subgroups: list[str] = Field([], description="categorical columns or features (e.g. sex,age): CET's test "
                                                 "metrics per subgroup, printed and kept in the version's "
                                                 "subgroups.json")
    horizon: float | None = Field(None, gt=0, description="the time, in the dataset's unit (e.g. 52 for a year in "
                                  "weeks), at which calibration against Kaplan-Meier and the AUC at h are judged for "
                                  "every event (default: each event's median training follow-up)")
    reference: Literal[REFERENCE_CHOICES] = Field(  # type: ignore[valid-type]
        "auto", description="a classical Cox fit per event on the same split, printed and recorded beside the "
                            "models: auto (on data without the true occurrence, where no Oracle is trained; "
                            "default), cox (on any data without comment embeddings), none")

    @model_validator(mode="after")
    def _known_models_with_cet(self):
        if self.models is not None:
            from flows.lib.modeling.train_eval import check_models  # here: the options parse before PyTorch loads

            check_models(self.models)
        return self


class RetrainParams(FlowParams):
    """retrain: rebuild a dataset if its inputs changed, then train-evaluate."""

    dataset: str | None = Field(None, pattern=NAME, description="synthetic, mimic, reddit, or the name of a dataset "
                                "built by build-table-dataset (default: $CET_RETRAIN_DATASET)")
    seed: int | None = Field(None, ge=0, description=SEED)
    promote_metric: Literal[PROMOTE_METRICS] | None = Field(None, description=PROMOTE_METRIC)  # type: ignore
    promote_tolerance: float | None = Field(None, ge=0, description=PROMOTE_TOLERANCE)
    promote_evidence: Literal[EVIDENCE] | None = Field(None, description=PROMOTE_EVIDENCE)  # type: ignore


class PredictParams(FlowParams):
    """predict: score new data with a registered model. Exactly one source: a prepared features
    parquet, raw MIMIC-III tables, or Pushshift dumps (the raw sources are featurised with the
    training build's items and statistics, nothing refitted)."""

    PATHS: ClassVar[tuple[str, ...]] = ("features", "mimic_dir", "dumps", "out", "work_dir", "sequences")

    out: str = Field(description="output file: .parquet, or .csv")
    features: str | None = Field(None, description="a table file (parquet, .csv, .tsv, .dta) with id and the "
                                                   "model's feature columns in raw units, as in the training dataset "
                                                   "(a table's categorical columns raw or encoded; scaled and filled "
                                                   "as in training)")
    mimic_dir: str | None = Field(None, description="raw MIMIC-III tables of new admissions (ADMISSIONS, "
                                                     "CHARTEVENTS, LABEVENTS, OUTPUTEVENTS as .csv or .csv.gz)")
    dumps: str | list[str] | None = Field(None, description="folders of Pushshift RC_/RS_ dumps of new users, "
                                                            "searched recursively")
    work_dir: str | None = Field(None, description="staged tables, scans and embeddings (default: a hidden folder "
                                                   "beside the output)")
    dataset: str | None = Field(None, pattern=NAME, description="the dataset's name, whose model scores: synthetic, "
                                "mimic, reddit, ... (default: $CET_RETRAIN_DATASET)")
    version: str | None = Field(None, description="a registered model version, e.g. v0003 (default: the promoted "
                                                  "one)")
    quantiles: list[float] = Field([0.1, 0.5, 0.9], description="time quantiles, each in (0, 1)")
    horizons: list[float] = Field([], description="times, in the dataset's unit (e.g. 7,30): adds risk_<h>_<event> "
                                                  "= P(the event happens by h) and, where events compete, "
                                                  "crude_<h>_<event> = P(it happens by h, first) (default: none)")
    rmst: bool = Field(False, description="also rmst_<h>_<event>: the restricted mean event-free time up to each "
                                          "horizon (the score C (RMST) judges; larger: later or never); needs "
                                          "horizons")
    sequences: str | None = Field(None, description="comment embeddings .npy, with features of a model trained on "
                                                    "Reddit")

    @model_validator(mode="after")
    def _check(self):
        if self.rmst and not self.horizons:
            raise ValueError(RMST_NEEDS_HORIZONS)
        bad = [q for q in self.quantiles if not 0 < q < 1]
        if bad or not self.quantiles:
            raise ValueError(f"quantiles must be a non-empty list of numbers in (0, 1), got {self.quantiles}")
        if not all(math.isfinite(h) and h > 0 for h in self.horizons):
            raise ValueError(f"horizons must be finite times > 0, got {self.horizons}")
        given = [k for k in ("features", "mimic_dir", "dumps") if getattr(self, k)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of features, mimic_dir, dumps (got {given or 'none'})")
        if self.sequences and not self.features:
            raise ValueError("sequences go with features; raw dumps are embedded here")
        return self

    @property
    def source(self) -> str:
        return "features" if self.features else "mimic_dir" if self.mimic_dir else "dumps"


class FullPipelineParams(FlowParams):
    """full-pipeline: every build, train-evaluate for each, the report."""

    datasets: list[Literal[DATASETS]] = Field(list(DATASETS), min_length=1,  # type: ignore[valid-type]
                                              description="the datasets built and trained")
    max_epochs: int | None = Field(None, ge=1, description="epoch cap (default: $CET_MAX_EPOCHS, else automatic)")
    hidden: int | None = Field(None, ge=1, description="hidden width (default: $CET_HIDDEN or 100)")
    seed: int | None = Field(None, ge=0, description=SEED)
    sequential: bool = Field(False, description="build each dataset after the one before it has trained, not "
                                                "while it trains (less memory at once; the log in order)")
