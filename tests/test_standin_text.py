"""The Reddit stand-in's realistic comment text: real length, a long tail, almost no repeats."""

import io
import json

import numpy as np
import orjson
import pytest
import zstandard

from flows.lib.standin import reddit as reddit_standin
from flows.lib.standin.reddit_text import MAX_CHARS, SHORT_REPLIES, TOPIC_PHRASES, realistic_texts

MONTHS = reddit_standin.Months("2016-01", "2016-02", "2016-03")


def test_realistic_texts_have_real_length_a_long_tail_and_few_repeats():
    rng = np.random.default_rng(0)
    topic = np.where(rng.random(20_000) < 0.6, rng.integers(0, 9, 20_000), -1)
    texts = realistic_texts(topic, rng)
    lengths = np.array([len(t) for t in texts])
    assert len(texts) == 20_000
    assert len(set(texts)) / len(texts) > 0.95  # the phrase generator: ~2 % distinct at scale
    assert 80 <= np.median(lengths) <= 140 and 150 <= lengths.mean() <= 260
    assert np.percentile(lengths, 99) > 800 and lengths.max() <= MAX_CHARS
    assert 0 < sum(t in SHORT_REPLIES for t in texts) < 0.05 * len(texts)
    # the user's interests still show: every topical comment carries a phrase of its topic
    for t, k in zip(texts[:2000], topic[:2000].tolist(), strict=True):
        if k >= 0:
            assert any(p[1:] in t for p in TOPIC_PHRASES[k]), t
    assert realistic_texts(topic[:50], np.random.default_rng(1)) == realistic_texts(
        topic[:50], np.random.default_rng(1)
    )


def _bodies(folder):
    out = []
    for f in sorted(folder.glob("RC_*.zst")):
        with zstandard.ZstdDecompressor(max_window_size=2**31).stream_reader(f.open("rb")) as r:
            for line in io.TextIOWrapper(r, encoding="utf-8"):
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if obj.get("author") not in ("[deleted]", "AutoModerator") and not obj["author"].startswith("lurker_"):
                    out.append(obj["body"])
    return out


def test_standin_writes_realistic_text_when_asked_and_regenerates_on_change(tmp_path):
    from flows.reddit import main

    assert (
        main(
            [
                "generate",
                "--users",
                "40",
                "--start",
                "2016-01",
                "--comment-end",
                "2016-02",
                "--submission-end",
                "2016-03",
                "--text",
                "realistic",
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    real = tmp_path / "r"
    assert json.loads((real / "standin.json").read_text())["text"] == "realistic"
    phrases = reddit_standin.generate(tmp_path / "p", n_users=40, seed=0, months=MONTHS, progress=False)
    b_real, b_phr = _bodies(real), _bodies(phrases)
    assert len(b_real) > 300
    assert len(set(b_real)) / len(b_real) > 0.95
    assert np.percentile([len(b) for b in b_real], 95) > 3 * np.percentile([len(b) for b in b_phr], 95)
    # the same parameters reuse the folder; another text style makes it again
    mtime = (real / "RC_2016-01.zst").stat().st_mtime_ns
    assert reddit_standin.ensure(real, 40, 0, MONTHS, "realistic") == real
    assert (real / "RC_2016-01.zst").stat().st_mtime_ns == mtime
    reddit_standin.ensure(real, 40, 0, MONTHS, "phrases")
    assert (real / "sha256sums.txt").read_text() == (phrases / "sha256sums.txt").read_text()
    with pytest.raises(ValueError, match=r"text must be one of \['phrases', 'realistic'\], got 'prose'"):
        reddit_standin.generate(tmp_path / "x", n_users=10, months=MONTHS, text="prose")
