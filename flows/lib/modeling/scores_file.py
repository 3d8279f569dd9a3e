"""The file ``flows.predict`` writes, and the checks of its command line that need no model:
the formats it writes, the mark it leaves, whether an existing file is one it wrote, and the
usage errors (the output, the input paths, the model version) raised before PyTorch and
Prefect load."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from cet_model.atomic import claim_files
from flows.lib.infra import registry
from flows.lib.infra.cli import require_path
from flows.lib.infra.folders import check_output_file
from flows.lib.infra.settings import Settings

SCORES_MARK = {"written_by": "cet", "kind": "scores"}  # parquet key-value metadata of every scores file
SCORES_SUFFIXES = (".parquet", ".csv")  # the formats predict writes, by the output's name
_SCORE_COLUMN = re.compile(r"^(p|t_q\d+|risk_[^_]+|rmst_[^_]+)_.+$")


def written_scores(path) -> bool:
    """Whether ``path`` is a scores file this project wrote, so predict may replace it: a parquet
    with ``SCORES_MARK`` (one from before the mark: an id and score columns only), or a CSV that
    its folder's ``.cet-output.json`` lists as scores (CSV has no metadata of its own)."""
    if Path(path).suffix.lower() == ".csv":
        try:
            claim_files(Path(path).parent, [Path(path).name], kind=SCORES_MARK["kind"], record=False)
        except FileExistsError:
            return False
        return Path(path).is_file()
    import pyarrow.parquet as pq

    try:
        meta = pq.read_metadata(path)
    except Exception:  # not parquet, unreadable: not ours
        return False
    kv = {k.decode(errors="replace"): v.decode(errors="replace") for k, v in (meta.metadata or {}).items()}
    if all(kv.get(k) == v for k, v in SCORES_MARK.items()):
        return True
    names = meta.schema.names
    return len(names) >= 2 and all(_SCORE_COLUMN.match(n) for n in names[1:])


def check_scores_out(params, s: Settings) -> None:
    """The output file checked before anything is read (``folders.check_output_file``): parquet or
    CSV, apart from the inputs, outside dataset folders and the registry, and an existing file only
    when it is a scores file predict wrote. ``params``: the flow's parameters or the parsed command line."""
    inputs = {"--features": params.features, "--mimic-dir": params.mimic_dir, "--dumps": params.dumps,
              "--sequences": params.sequences, "--work-dir": params.work_dir}
    check_output_file(params.out, "--out", SCORES_SUFFIXES, inputs, registries=[s.models_dir],
                      ours=written_scores)


def check_command(ap: argparse.ArgumentParser, args: argparse.Namespace) -> Path:
    """The usage errors of ``python -m flows.predict`` that need no model loaded, in the order a
    user meets them: the output (never over an input, a dataset or the registry), the inputs
    exist, ``--rmst`` has its horizons, and the dataset has that model version. Exits through
    ``ap.error``; returns the version."""
    s = Settings()
    try:  # before anything is read: never write over an input, a dataset or the registry
        check_scores_out(args, s)
    except ValueError as exc:
        ap.error(str(exc))
    require_path(ap, "--features", args.features, "file")
    require_path(ap, "--mimic-dir", args.mimic_dir, "dir")
    require_path(ap, "--sequences", args.sequences, "file")
    for d in args.dumps or []:
        require_path(ap, "--dumps", d, "dir")
    if args.rmst and not args.horizons:
        ap.error("--rmst needs --horizons: the restricted mean event-free time is taken up to each of them")
    try:
        return registry.resolve_version(s.models_dir, s.dataset_name(args.dataset), args.version)
    except (FileNotFoundError, ValueError) as exc:
        ap.error(str(exc))
