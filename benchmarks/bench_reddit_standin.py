"""Reddit stand-in generation: the dumps' zstd framing with zstd's default long-distance hash table
for a 2 GiB window (2^24 entries, what ``compressor`` used before) against the 2^20 it
uses now.

    python benchmarks/bench_reddit_standin.py [--users 150,2000] [--rounds 2]

For each size, ``--rounds`` rounds alternating the two compressors, each generating the whole
stand-in (``flows.lib.standin.reddit.generate``, seed 0) into a fresh temporary folder: wall
seconds, total compressed bytes, and whether every file's frames decode to the same bytes under
both (and carry the same window size in their headers). Writes
``benchmarks/results/reddit_standin.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402
from flows.lib.standin import reddit  # noqa: E402

NOW = reddit.compressor


def zstd_default_table() -> zstandard.ZstdCompressor:
    """The framing as before: the same parameters with zstd's own long-distance hash size."""
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=31, enable_ldm=True,
                                                            write_checksum=True, write_content_size=False)
    return zstandard.ZstdCompressor(compression_params=params)


ARMS = {"ldm_hash_log default (24)": zstd_default_table, "ldm_hash_log 20 (now)": NOW}


def _contents(folder: Path) -> dict[str, tuple[str, int]]:
    """Per dump file: sha256 of the decoded bytes and the frame's declared window size."""
    out = {}
    for p in sorted(folder.glob("R[CS]_*.zst")):
        raw = p.read_bytes()
        window = zstandard.get_frame_parameters(raw).window_size
        data = zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(raw).read()
        out[p.name] = (hashlib.sha256(data).hexdigest(), window)
    return out


def one(arm: str, users: int) -> tuple[float, int, dict]:
    reddit.compressor = ARMS[arm]  # generate() looks it up at call time
    try:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            reddit.generate(Path(tmp) / "dumps", n_users=users, seed=0, progress=False)
            seconds = time.perf_counter() - t0
            files = list((Path(tmp) / "dumps").glob("R[CS]_*.zst"))
            return seconds, sum(p.stat().st_size for p in files), _contents(Path(tmp) / "dumps")
    finally:
        reddit.compressor = NOW


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", default="150,2000", help="comma-separated stand-in sizes (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/reddit_standin.json")
    args = ap.parse_args(argv)
    record = {"machine": machine(), "command": " ".join(["python benchmarks/bench_reddit_standin.py", *sys.argv[1:]]),
              "sizes": []}
    for users in [int(u) for u in args.users.split(",")]:
        seconds = {arm: [] for arm in ARMS}
        size, contents = {}, {}
        for _ in range(args.rounds):
            for arm in ARMS:
                s, b, c = one(arm, users)
                seconds[arm].append(round(s, 3))
                size[arm], contents[arm] = b, c
        same = contents[list(ARMS)[0]] == contents[list(ARMS)[1]]
        row = {"users": users, "files": len(contents[list(ARMS)[1]]), "seconds": seconds,
               "median_seconds": {a: statistics.median(v) for a, v in seconds.items()},
               "compressed_bytes": size, "decoded_bytes_and_windows_identical": same}
        a, b = row["median_seconds"].values()
        row["speedup"] = round(a / b, 2)
        print(f"{users} users, {row['files']} files: {a:.2f} s -> {b:.2f} s ({row['speedup']}x), "
              f"{size[list(ARMS)[0]]:,} -> {size[list(ARMS)[1]]:,} bytes, decoded identical: {same}", flush=True)
        record["sizes"].append(row)
    write_text(args.out, json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
