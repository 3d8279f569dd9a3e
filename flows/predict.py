"""Prefect flow ``predict`` and its CLI: score a features parquet with the promoted CET model.

    python -m flows.predict --dataset mimic --features new.parquet --out scores.parquet \\
        [--model-version v0003] [--quantiles 0.1,0.5,0.9] [--sequences seq.npy]

The output has ``id``, then per event ``p_<event>`` (P(the event ever happens)) and
``t_qNN_<event>`` (quantiles of its time given that it happens, in the dataset's unit).
The features file needs ``id`` and every feature column the model was trained on.
"""

from __future__ import annotations

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.lib.flow_params import PredictParams
from flows.lib.infra.cli import apply_log_level, command_parser
from flows.lib.infra.settings import Settings
from flows.lib.modeling import predict as predict_lib


@task(name="score-features")
def score(features: str, version: str, out: str, quantiles: list[float], sequences: str | None, device: str) -> str:
    path = predict_lib.score(features, version, out, quantiles, sequences, device)
    get_run_logger().info("scores written to %s (model %s)", path, version)
    return str(path)


@flow(name="predict")
def predict(params: PredictParams) -> str:
    """Score ``params.features`` with the dataset's promoted model (or ``params.version``)."""
    s = Settings()
    version_dir = predict_lib.resolve_version(s.models_dir, params.dataset or s.retrain_dataset, params.version)
    return score(params.features, str(version_dir), params.out, list(params.quantiles), params.sequences, s.device)


def main(argv=None) -> int:
    ap = command_parser("python -m flows.predict", __doc__.split("\n\n")[0])
    ap.add_argument("--features", required=True, help="parquet with id and the model's feature columns")
    ap.add_argument("--out", required=True, help="output parquet")
    ap.add_argument("--dataset", help="registry name: synthetic, mimic, reddit, ... (default: $CET_RETRAIN_DATASET)")
    ap.add_argument("--model-version", help="a registered model version, e.g. v0003 (default: the promoted one)")
    ap.add_argument("--quantiles", default="0.1,0.5,0.9", help="time quantiles (default %(default)s)")
    ap.add_argument("--sequences", help="comment embeddings .npy, for models trained on Reddit")
    args = ap.parse_args(argv)
    apply_log_level(args)
    try:
        qs = [float(q) for q in args.quantiles.split(",") if q.strip()]
    except ValueError:
        ap.error(f"--quantiles: {args.quantiles!r} is not a comma-separated list of numbers")
    try:
        s = Settings()
        version = predict_lib.resolve_version(s.models_dir, args.dataset or s.retrain_dataset, args.model_version)
    except FileNotFoundError as exc:
        ap.error(str(exc))
    try:
        params = PredictParams(features=args.features, out=args.out, dataset=args.dataset, version=version.name,
                               quantiles=qs, sequences=args.sequences)
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    print(predict(params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
