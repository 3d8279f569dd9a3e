"""The registry's commands of ``python -m flows.train``: ``versions``, ``promote``, ``show`` and
``explain``. They read or change a models folder directly, with no flow run and no server;
``versions`` and ``promote`` load neither PyTorch nor Prefect, so they answer at once
(``flows/train.py`` runs them before its own imports). A change takes the lock that
train-evaluate holds while it registers and judges a version.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from flows.lib import commands
from flows.lib.infra import registry
from flows.lib.infra.cli import apply_log_level, interruptible, log_to_terminal
from flows.lib.infra.locks import output_lock
from flows.lib.infra.settings import Settings
from flows.lib.modeling import render

COMMANDS = ("versions", "promote", "show", "explain")


def main(argv=None) -> int:
    """``python -m flows.train versions|promote|show|explain ...``."""
    ap = commands.train()
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    apply_log_level(args)
    log_to_terminal()  # no Prefect here to show the log: progress and counts would be lost
    with interruptible(ap):
        return registry_command(ap, args)


def registry_command(ap, args) -> int:
    """``versions``, ``promote``, ``show`` and ``explain``: the registry's files read or changed directly (no
    flow run), a change under the lock that train-evaluate holds while it registers and judges a
    version."""
    s = Settings()
    try:
        name = s.dataset_name(args.dataset)
    except ValueError as exc:
        ap.error(str(exc))
    if not registry.versions(s.models_dir, name):
        ap.error(f"no model versions of {name} in {s.models_dir / name} (train one with python -m flows.train "
                 f"evaluate --dataset {name})")
    if args.command == "explain":
        return explain_command(ap, args, s, name)
    if args.command == "show":
        from flows.lib.modeling.version_text import SUBGROUPS_FILE

        try:
            version = registry.resolve_version(s.models_dir, name, args.model_version)
            decision = (json.loads((version / "decision.json").read_text())
                        if (version / "decision.json").is_file() else None)
            print_version(version, decision, version / SUBGROUPS_FILE if (version / SUBGROUPS_FILE).is_file() else None)
        except (ValueError, FileNotFoundError) as exc:
            ap.error(str(exc))
        return 0
    if args.command == "versions":
        try:
            rows = registry.version_rows(s.models_dir, name)
        except ValueError as exc:  # a damaged record, named
            ap.error(str(exc))
        table = [["version", "promoted", "judged (UTC)", "data", "val AUC", "val C (RMST)", "the rule's decision"]]
        for r in rows:
            table.append([r["version"], ("* by hand" if r["by_hand"] else "*") if r["promoted"] else "",
                          r["judged"] or "-", r["data"] or "-",
                          *("-" if r[k] is None else f"{r[k]:.4f}" for k in ("val_auc", "val_ci_rmst")),
                          r["decision"] or "-"])
        plural = "" if len(rows) == 1 else "s"
        print(f"{s.models_dir / name}: {len(rows)} version{plural} (*: promoted; history.jsonl has every decision)")
        print("\n".join(render.text(table)))
        return 0
    with output_lock(s.models_dir / name, s.lock_wait, "promote"):
        try:
            record = registry.promote_by_hand(s.models_dir, name, args.model_version, args.reason)
        except ValueError as exc:
            ap.error(str(exc))
    print(f"{s.models_dir / name / args.model_version}: {record['reason']}"
          + (f" (was {record['previous']})" if record.get("previous") and record["previous"] != args.model_version
             else ""))
    return 0


def explain_command(ap, args, s: Settings, name: str) -> int:
    """``explain``: permutation importance of a version's model, printed and written to ``--out``."""
    from flows.lib.infra.folders import check_output_file
    from flows.lib.modeling import explain

    if args.repeats < 1 or args.top < 1 or args.max_rows < 2:
        ap.error("--repeats and --top must be at least 1, --max-rows at least 2")
    if args.out and Path(args.out).is_dir():
        ap.error(f"--out {args.out}: a folder; give a file name, e.g. importance.csv")
    if args.out:
        try:
            check_output_file(args.out, "--out", ".csv", {"--data": args.data}, registries=[s.models_dir],
                              ours=explain.written_csv)
        except ValueError as exc:
            ap.error(str(exc))
    try:
        version = registry.resolve_version(s.models_dir, name, args.model_version)
        result = explain.explain(version, model=args.model, split=args.split, repeats=args.repeats, seed=args.seed,
                                 device=s.device, scores=(args.score,) if args.score else explain.SCORES,
                                 max_rows=args.max_rows, data_dir=args.data)
    except (ValueError, FileNotFoundError) as exc:
        ap.error(str(exc))
    print("\n".join(explain.report_lines(result, args.top, args.score)))
    if args.out:
        print(f"wrote {explain.write_csv(result, args.out)}")
    return 0


def print_version(version: Path, decision: dict | None, subgroups_file=None) -> None:
    """What evaluate prints after training and ``show`` prints of any version: the rule's
    decision, the test metrics (``summary_lines``) and the subgroups, if any were scored."""
    from flows.lib.modeling import version_text

    if decision:
        print(f"{version}: {decision['reason']}")
        if decision.get("comparison"):  # how the promoted version was compared with it
            print(f"  {decision['comparison']}")
    else:
        print(f"{version}: not judged by the promotion rule")
    print("\n".join(version_text.summary_lines(version)))
    if subgroups_file:
        print("\n".join(version_text.subgroup_lines(subgroups_file)))
