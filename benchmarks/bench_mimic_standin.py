"""MIMIC stand-in generation and staging at two gzip levels: what the pipeline's working copy costs.

    python benchmarks/bench_mimic_standin.py [--scale 0.05] [--levels 6,1] [--rounds 2]

The pipeline generates its stand-in (``flows.lib.standin.mimic.ensure``) into a working folder
and stages it at once; it writes it with gzip level 1 (``flows.mimic generate``,
for a stand-in to keep, still defaults to 6). For each level, ``--rounds`` rounds alternating the
levels, each into a fresh temporary folder: ``generate`` seconds (seed 0), the eight files'
compressed bytes, and the seconds to stage every table the build reads (``stage_all``, DuckDB,
as the build flow does); and whether every file decompresses to the same bytes at both levels.
Writes ``benchmarks/results/mimic_standin.json``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402
from flows.lib.mimic.staging import stage_all  # noqa: E402
from flows.lib.standin import mimic as mimic_standin  # noqa: E402


def _decoded(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.glob("*.csv.gz")):
        h = hashlib.sha256()
        with gzip.open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out[p.name] = h.hexdigest()
    return out


def one(scale: float, level: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "standin"
        t0 = time.perf_counter()
        mimic_standin.generate(src, scale=scale, seed=0, compresslevel=level, progress=False)
        gen_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        stage_all(src, Path(tmp) / "staged")
        stage_s = time.perf_counter() - t0
        return {"generate_s": round(gen_s, 2), "stage_s": round(stage_s, 2),
                "bytes": sum(p.stat().st_size for p in src.glob("*.csv.gz")), "decoded": _decoded(src)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=0.05, help="stand-in scale (default %(default)s, the main job's)")
    ap.add_argument("--levels", default="6,1", help="gzip levels to compare (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/mimic_standin.json")
    args = ap.parse_args(argv)
    levels = [int(v) for v in args.levels.split(",")]
    runs = {lv: [] for lv in levels}
    for _ in range(args.rounds):
        for lv in levels:
            r = one(args.scale, lv)
            runs[lv].append(r)
            print(f"level {lv}: generate {r['generate_s']} s, stage {r['stage_s']} s, {r['bytes']:,} bytes", flush=True)
    decoded = [runs[lv][0]["decoded"] for lv in levels]
    same = all(d == decoded[0] for d in decoded)
    summary = {str(lv): {"generate_s": [r["generate_s"] for r in rs], "stage_s": [r["stage_s"] for r in rs],
                         "median_generate_s": statistics.median(r["generate_s"] for r in rs),
                         "median_stage_s": statistics.median(r["stage_s"] for r in rs), "bytes": rs[0]["bytes"]}
               for lv, rs in runs.items()}
    print(f"decoded bytes identical across levels: {same}")
    for lv, s in summary.items():
        print(f"level {lv}: median generate {s['median_generate_s']} s, stage {s['median_stage_s']} s, "
              f"{s['bytes']:,} bytes")
    record = {"machine": machine(), "command": " ".join(["python benchmarks/bench_mimic_standin.py", *sys.argv[1:]]),
              "scale": args.scale, "rounds": args.rounds, "levels": summary, "decoded_identical": same}
    write_text(args.out, json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
