"""Each flow takes one typed parameter model; bad runs are refused before any work, naming the field."""

import inspect

import pydantic
import pytest

from flows.lib import flow_params
from flows.serve import FLOWS  # every flow the deployments serve
from flows.train import train_evaluate


@pytest.mark.parametrize("flow", FLOWS, ids=lambda f: f.name)
def test_every_flow_takes_one_typed_parameter_model(flow):
    sig = inspect.signature(flow.fn)
    assert list(sig.parameters) == ["params"]
    annotation = sig.parameters["params"].annotation
    model = getattr(flow_params, annotation) if isinstance(annotation, str) else annotation
    assert issubclass(model, flow_params.FlowParams)


@pytest.mark.parametrize("model, fields, name", [
    (flow_params.MimicBuildParams, {"standin_scale": 50}, "standin_scale"),
    (flow_params.MimicBuildParams, {"memory_limit": "lots"}, "memory_limit"),
    (flow_params.MimicBuildParams, {"window_events": "drop"}, "window_events"),
    (flow_params.RedditBuildParams, {"start": "2017-1"}, "start"),
    (flow_params.RedditBuildParams, {"max_error_rate": 2}, "max_error_rate"),
    (flow_params.RedditBuildParams, {"device": "cuda:99"}, "device: 'cuda:99' but"),  # embedding on a GPU it lacks
    (flow_params.TrainEvaluateParams, {"runs": -1}, "runs"),
    (flow_params.TrainEvaluateParams, {"promote_metric": "val_f1"}, "promote_metric"),
    (flow_params.TrainEvaluateParams, {"horizon": 0}, "horizon"),
    (flow_params.TrainEvaluateParams, {"reference": "lifelines"}, "reference"),
    (flow_params.RetrainParams, {"dataset": "census/2020"}, "dataset"),  # a name (a table's too), not a path
    (flow_params.FullPipelineParams, {"datasets": ["mimic", "census"]}, "datasets"),
    (flow_params.PredictParams, {"features": "f.parquet", "out": "o.parquet", "quantiles": [0.5, 1.5]}, "quantiles"),
    (flow_params.SyntheticParams, {"nn": 4}, "nn"),
    (flow_params.TableBuildParams, {"table": "t.csv", "name": "mine", "time_unit": "days", "events": {}}, "events"),
    (flow_params.TableBuildParams, {"table": "t.csv", "name": "my data", "time_unit": "days",
                                    "events": {"death": ("days", "died")}}, "name"),
    (flow_params.TableBuildParams, {"table": "t.csv", "name": "mine", "time_unit": "days",
                                    "events": {"death": ("days",)}}, "events"),
    (flow_params.TrainEvaluateParams, {"dataset": "data/mimic"}, "dataset"),  # a name, not a folder: data=
    (flow_params.PredictParams, {"out": "o.parquet", "dataset": "../x"}, "dataset"),
])
def test_a_bad_field_is_refused_naming_it(model, fields, name):
    with pytest.raises(pydantic.ValidationError, match=name):
        model(**fields)


def test_two_mimic_sources_are_refused():
    with pytest.raises(pydantic.ValidationError, match="not both"):
        flow_params.MimicBuildParams(mimic_dir="/a", download_demo_url="http://127.0.0.1/x")


def test_a_deployment_run_passes_a_plain_dict():
    """What `prefect deployment run --param params='{...}'` sends is validated into the model."""
    validated = train_evaluate.validate_parameters({"params": {"dataset": "synthetic", "runs": 2}})
    assert validated["params"] == flow_params.TrainEvaluateParams(dataset="synthetic", runs=2)
    with pytest.raises(Exception, match="runs"):
        train_evaluate.validate_parameters({"params": {"runs": -2}})


@pytest.mark.parametrize("horizons", [[0.0], [-7.0], [float("inf")]])
def test_predict_horizons_are_times_after_zero(horizons):
    with pytest.raises(pydantic.ValidationError, match="horizons must be finite times > 0"):
        flow_params.PredictParams(out="o.parquet", features="f.parquet", horizons=horizons)


@pytest.mark.parametrize("fields", [{}, {"features": "f.parquet", "mimic_dir": "/raw"},
                                    {"mimic_dir": "/raw", "dumps": ["/d"]},
                                    {"mimic_dir": "/raw", "sequences": "s.npy"}])
def test_predict_takes_exactly_one_source(fields):
    with pytest.raises(pydantic.ValidationError, match="exactly one of features, mimic_dir, dumps|sequences go "
                                                       "with features"):
        flow_params.PredictParams(out="o.parquet", **fields)


def test_train_cli_says_where_a_folder_goes(capsys):
    from flows.train import main
    with pytest.raises(SystemExit):
        main(["evaluate", "--dataset", "data/mimic"])
    assert "--dataset takes a name (e.g. mimic); give the folder with --data data/mimic" in capsys.readouterr().err


@pytest.mark.parametrize(("models", "match"), [
    (["ET", "BC"], r"models \['ET', 'BC'\] must include CET: the promotion rule judges it"),
    (["CET", "XGB"], r"unknown models \['XGB'\]; choose from"),
])
def test_train_evaluate_models_are_known_presets_with_cet(models, match):
    with pytest.raises(pydantic.ValidationError, match=match):
        flow_params.TrainEvaluateParams(dataset="rossi", models=models)
    assert flow_params.TrainEvaluateParams(dataset="rossi", models=["CET", "ET"]).models == ["CET", "ET"]
