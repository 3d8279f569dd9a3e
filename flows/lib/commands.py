"""Every command line's options, light to import: each ``python -m flows.<name>`` parses its
options here before Prefect, PyTorch or polars load, so ``--help``, ``--version`` and a usage
error answer at once (``parse_early``), and its ``main`` parses them again to run.

A flow's options are not declared here: ``options`` makes one per field of the flow's parameter
model (``flows.lib.flow_params``), with the field's type, choices, default and description, and
``params`` turns the parsed options back into that model. The commands with no flow behind them
(``generate``, ``versions``, ``promote``, ``show``, ``explain``, ``serve``) declare theirs here.

    >>> ap = table()
    >>> ap.parse_args(["--table", "t.csv", "--name", "c", "--event", "death=days,died", "--time-unit", "days"]).name
    'c'
"""

from __future__ import annotations

import argparse
import ast
import sys
import types
import typing
from pathlib import Path

from cet_model.choices import IMPORTANCE_REPEATS, IMPORTANCE_SCORES
from flows.lib import flow_params
from flows.lib.choices import DEMO_URL, EXPLAIN_SPLITS
from flows.lib.infra.cli import command_parser

FLOWS = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    """The docstring of ``flows/<name>.py``, read without importing it."""
    return ast.get_docstring(ast.parse((FLOWS / f"{name}.py").read_text())) or ""


def parse_early(name: str) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """Parse ``sys.argv`` with command ``name``'s options: ``--help``, ``--version`` and a usage
    error exit here, before the flow module's imports; valid options return (with the parser, for
    a command's own early checks), to be parsed again by its ``main``."""
    ap = globals()[name]()
    return ap, ap.parse_args(sys.argv[1:])


def _listed(kind):
    """An argparse type: a comma-separated list of ``kind``."""
    def parse(text: str) -> list:
        try:
            return [kind(v.strip()) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {kind.__name__}s") from None
    parse.__name__ = f"list of {kind.__name__}"
    return parse


def _kinds(field) -> list:
    """The types a field's value may have, ``None`` left out: ``str | list[str] | None`` -> [str, list[str]]."""
    union = typing.get_origin(field.annotation) in (typing.Union, types.UnionType)
    return [a for a in typing.get_args(field.annotation) if a is not type(None)] if union else [field.annotation]


def _one_or_several(field) -> bool:
    """A field that takes one value or a list of them (``str | list[str]``)."""
    kinds = _kinds(field)
    return len(kinds) == 2 and kinds[0] is str and typing.get_origin(kinds[1]) is list


def _argument(field) -> dict:
    """argparse keywords for one pydantic field: its type, choices, whether it is required, and its
    description as help, with the default appended where the description does not give it."""
    kinds = _kinds(field)
    kind = kinds[0]
    kw: dict = {"help": (field.description or "").replace("%", "%%")}  # argparse formats help with %
    if field.is_required():
        kw["required"] = True
    elif field.default is not None and field.default is not False and field.default != [] \
            and "default" not in kw["help"]:
        shown = ",".join(map(str, field.default)) if isinstance(field.default, list) else field.default
        kw["help"] += f" (default {shown})"
    if kind is bool:
        return kw | {"action": "store_true"}
    if _one_or_several(field):  # "a" or ["a", "b"]
        return kw | {"nargs": "+", "action": "extend"}
    if typing.get_origin(kind) is typing.Literal:
        return kw | {"choices": typing.get_args(kind)}
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        if typing.get_origin(item) is typing.Literal:
            values = typing.get_args(item)
            kw["help"] += f"; of {', '.join(values)}"
            item = str
        return kw | {"type": _listed(item), "metavar": "A,B,..."}
    return kw | ({"type": kind} if kind in (int, float) else {})


def options(parser: argparse.ArgumentParser, model, flags: dict | None = None, **custom: dict) -> None:
    """One option per field of the flow parameter model ``model`` (``flows.lib.flow_params``),
    declared by the field alone: ``--<field-name>`` (``flags`` renames), its type, choices,
    default and help; ``custom`` replaces the keywords of a field whose command-line form differs
    (e.g. ``--event NAME=TIME,INDICATOR`` for a mapping; the help stays the field's). Every
    option's value stays ``None`` when not given, so the model's default (or the setting behind
    it) applies.

    >>> from flows.lib.flow_params import SyntheticParams
    >>> ap = argparse.ArgumentParser()
    >>> options(ap, SyntheticParams)
    >>> params(ap.parse_args(["--n", "500", "--mode", "independent"]), SyntheticParams)
    SyntheticParams(out=None, mode='independent', n=500, seed=0)
    """
    flags = flags or {}
    for name, field in model.model_fields.items():
        kw = _argument(field) | custom.get(name, {})
        flag = flags.get(name, _flag(name))
        _FLAGS[(model.__name__, name)] = flag
        parser.add_argument(flag, dest=name, **kw)


_FLAGS: dict[tuple[str, str], str] = {}  # (parameters' class, field): the option ``options`` gave it


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def params(args: argparse.Namespace, model, **given):
    """The flow parameters ``model`` from parsed ``options`` (and ``given`` values): the options
    left out are left out, so the model's defaults apply. A one-item list for a field that takes
    one value or several becomes that value. A bad value is a ``ValueError`` naming its option
    (:func:`validation_text`), for the command to give as a usage error."""
    from pydantic import ValidationError

    values = {}
    for name, field in model.model_fields.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        if isinstance(value, list) and len(value) == 1 and _one_or_several(field):
            value = value[0]
        values[name] = value
    try:
        return model(**values | given)
    except ValidationError as exc:
        raise ValueError(validation_text(exc, lambda name: _FLAGS.get((model.__name__, name), _flag(name)))) from None


def validation_text(exc, flag=_flag) -> str:
    """pydantic's ValidationError as a command line says it: each problem with the option it is
    about (``flag(field)``; none for a rule over several), without pydantic's input dump and link.

    >>> from pydantic import BaseModel, field_validator
    >>> class P(BaseModel):
    ...     max_epochs: int
    ...     @field_validator("max_epochs")
    ...     @classmethod
    ...     def positive(cls, v):
    ...         if v < 1:
    ...             raise ValueError("must be at least 1")
    ...         return v
    >>> try:
    ...     P(max_epochs=0)
    ... except Exception as e:
    ...     print(validation_text(e))
    --max-epochs: must be at least 1, got 0
    """
    said = []
    for error in exc.errors():
        message = str(error.get("msg", "")).removeprefix("Value error, ")
        where = [str(part) for part in error.get("loc", ()) if not isinstance(part, int)]
        given = error.get("input")  # an option's value as typed (a rule over several gets them all: not repeated)
        if where and isinstance(given, str | int | float) and len(str(given)) <= 80:
            message += f", got {given!r}"
        said.append((f"{flag(where[0])}: " if where else "") + message)
    return "; ".join(said)


def synthetic() -> argparse.ArgumentParser:
    """``python -m flows.synthetic``'s options."""
    ap = command_parser("python -m flows.synthetic", _doc("synthetic").split("\n\n")[0])
    options(ap, flow_params.SyntheticParams)
    return ap


def mimic() -> argparse.ArgumentParser:
    """``python -m flows.mimic``'s options."""
    ap = command_parser("python -m flows.mimic", _doc("mimic").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the MIMIC dataset folder")
    options(b, flow_params.MimicBuildParams, flags={"download_demo_url": "--download-demo"},
            download_demo_url={"nargs": "?", "const": DEMO_URL, "metavar": "URL"})
    g = sub.add_parser("generate", help="write a MIMIC-III stand-in in the full release's layout, with planted truth")
    g.add_argument("--scale", type=float, required=True,
                   help="fraction of the full release (61,532 ICU stays, 330M chart rows): 0.001 to 1")
    g.add_argument("--out", required=True, help="folder for the stand-in tables (must be empty or absent)")
    g.add_argument("--seed", type=int, default=0, help="generator seed (default %(default)s)")
    g.add_argument("--compresslevel", type=int, default=6, choices=range(1, 10), metavar="1-9",
                   help="gzip level (default %(default)s, as gzip's default)")
    g.add_argument("--force", action="store_true", help="replace an existing, non-empty --out")
    return ap


def reddit() -> argparse.ArgumentParser:
    """``python -m flows.reddit``'s options."""
    ap = command_parser("python -m flows.reddit", _doc("reddit").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the Reddit dataset folder")
    options(b, flow_params.RedditBuildParams)
    g = sub.add_parser("generate", help="write stand-in Pushshift dumps with planted truth")
    g.add_argument("--users", type=int, required=True, help="simulated users (1k to 1M)")
    g.add_argument("--out", required=True, help="folder for the stand-in dumps (must be empty or absent)")
    g.add_argument("--seed", type=int, default=0, help="generator seed (default %(default)s)")
    g.add_argument("--start", default="2015-01", help="first month written, YYYY-MM (default %(default)s)")
    g.add_argument("--comment-end", default="2017-11", help="last comment month (default %(default)s)")
    g.add_argument("--submission-end", default="2020-01", help="last submission month (default %(default)s)")
    g.add_argument("--text", choices=["phrases", "realistic"], default="phrases",
                   help="comment text: short topical phrases (default) or real length with a long tail and "
                        "almost no repeats")
    g.add_argument("--malformed-rate", type=float, default=0.0, help="share of broken lines to inject (tests)")
    g.add_argument("--force", action="store_true", help="replace an existing, non-empty --out")
    return ap


def table() -> argparse.ArgumentParser:
    """``python -m flows.table``'s options."""
    ap = command_parser("python -m flows.table", _doc("table").split("\n\n")[0])
    options(ap, flow_params.TableBuildParams, flags={"events": "--event"},
            events={"type": _event, "action": "append", "metavar": "NAME=TIME,INDICATOR"})
    return ap


def _event(text: str) -> tuple[str, tuple[str, str]]:
    """``--event NAME=TIME,INDICATOR`` -> (NAME, (TIME, INDICATOR))."""
    name, sep, cols = text.partition("=")
    parts = [c.strip() for c in cols.split(",")]
    if not sep or not name.strip() or len(parts) != 2 or not all(parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=TIME_COLUMN,INDICATOR_COLUMN (e.g. death=days,died, "
                                         "or death=days,status:2 for a status column)")
    return name.strip(), (parts[0], parts[1])


def events(given: list[tuple[str, tuple[str, str]]]) -> dict[str, tuple[str, str]]:
    """The ``--event`` options as the ``events`` mapping; a name given twice is refused."""
    mapping = dict(given)
    if len(mapping) != len(given):
        raise ValueError("--event: an event name is given twice")
    return mapping


def train() -> argparse.ArgumentParser:
    """``python -m flows.train``'s options."""
    ap = command_parser("python -m flows.train", _doc("train").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="train CET, ET and BC on a dataset folder and register them")
    options(ev, flow_params.TrainEvaluateParams)
    rt = sub.add_parser("retrain", help="rebuild a dataset if its inputs changed, train, apply the promotion rule")
    options(rt, flow_params.RetrainParams)
    ls = sub.add_parser("versions", help="list a dataset's model versions: promoted, data, CET's validation "
                                         "AUC and C (RMST), the rule's decision (no flow run)")
    pr = sub.add_parser("promote", help="promote a version by hand (a rollback), with a reason kept in "
                                        "history.jsonl (no flow run)")
    sh = sub.add_parser("show", help="a version's test metrics, as evaluate printed them after training (no flow run)")
    ex = sub.add_parser("explain", help="which inputs a version's model relies on: permutation importance per "
                                        "event on the validation rows of its own data (no flow run)")
    for p in (ls, pr, ex, sh):
        p.add_argument("--dataset", help="the dataset's name (default: $CET_RETRAIN_DATASET)")
    pr.add_argument("--model-version", required=True, help="the version to promote, e.g. v0002")
    pr.add_argument("--reason", required=True, help="why, in words: kept in models/<name>/history.jsonl")
    for p in (ex, sh):
        p.add_argument("--model-version", help="the version (default: the promoted one)")
    ex.add_argument("--model", default="CET", help="which of the version's models (default: CET)")
    ex.add_argument("--split", choices=EXPLAIN_SPLITS, default="val",
                    help="the rows shuffled and scored (default: val; the test split is for the reported figures)")
    ex.add_argument("--repeats", type=int, default=IMPORTANCE_REPEATS,
                    help=f"shuffles per input (default: {IMPORTANCE_REPEATS})")
    ex.add_argument("--seed", type=int, default=0, help="seed of the shuffles (default: 0)")
    ex.add_argument("--score", choices=IMPORTANCE_SCORES,
                    help="score only this, and rank by it: auc (whether, against the true occurrence), ci_rmst "
                         "(later or never), ci_timing (when, among the rows with the event observed); default: all "
                         "that are defined, ranked by the first (AUC where the data have the truth, else C (RMST))")
    ex.add_argument("--max-rows", type=int, default=5000,
                    help="a larger split is cut to this many rows drawn at random (default: "
                         "5000; the time grows with the rows)")
    ex.add_argument("--top", type=int, default=20, help="inputs printed (default: 20; --out has all)")
    ex.add_argument("--out", help="a CSV with every input, event and score")
    ex.add_argument("--data", help="the dataset folder, if it moved since the version was trained (default: where "
                                   "it was; it must hold the same files)")
    return ap


def predict() -> argparse.ArgumentParser:
    """``python -m flows.predict``'s options."""
    ap = command_parser("python -m flows.predict", _doc("predict").split("\n\n")[0])
    options(ap, flow_params.PredictParams, flags={"version": "--model-version"})
    return ap


def serve() -> argparse.ArgumentParser:
    """``python -m flows.serve``'s options."""
    ap = command_parser(
        "python -m flows.serve",
        _doc("serve").split("\n\n")[0],
        epilog=_doc("serve").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--limit", type=int, default=2, help="flow runs at once (default %(default)s; 2 cores)")
    ap.add_argument("--retry-seconds", type=float, default=5.0,
                    help="while the Prefect API is unreachable, check it this often (default %(default)s)")
    ap.add_argument("--single-user", action="store_true",
                    help="serve even when the Prefect API asks for no credentials: only on a machine where no other "
                         "user or untrusted process can reach it")
    ap.add_argument("--max-outages", type=int, default=0,
                    help="API outages to wait out; the next one ends serve with its error "
                         "(default 0: wait out every one)")
    return ap


def full_pipeline() -> argparse.ArgumentParser:
    """``python -m flows.full_pipeline``'s options."""
    ap = command_parser(
        "python -m flows.full_pipeline",
        _doc("full_pipeline").split("\n\n")[0],
        epilog=_doc("full_pipeline").split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    options(ap, flow_params.FullPipelineParams)
    return ap
