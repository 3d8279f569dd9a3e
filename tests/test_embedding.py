"""The GPU's embedding steps (``encode_on_gpu``: longest first, batches tokenised ahead on a
helper thread by the model's Rust tokenizer, vectors gathered back into the texts' order) checked
on the CPU with the packaged model: with the same batches they must give exactly what
sentence-transformers' ``encode`` gives, and the tokenizer exactly what its ``preprocess`` gives.
On a GPU, tests/test_gpu_embedding.py compares them with the CPU's fp32 vectors."""

import numpy as np
import pytest

from flows.lib.reddit.embed import (
    DEFAULT_MODEL,
    backend_tokeniser,
    encode_on_gpu,
    load_model,
    resolve_model_path,
    text_tokeniser,
)
from flows.lib.standin.reddit_text import TOPIC_PHRASES, realistic_texts

pytestmark = pytest.mark.slow  # loads the packaged sentence-transformers model (about 10 s of imports)


def test_the_pipelined_steps_give_encode_s_vectors_in_the_texts_order():
    rng = np.random.default_rng(3)
    topic = np.where(rng.random(90) < 0.6, rng.integers(0, len(TOPIC_PHRASES), 90), -1)
    texts = list(realistic_texts(topic, rng)) + ["", "  ", "x" * 2000]
    st = load_model(device="cpu")
    assert load_model(device="cpu") is st  # loaded once per process and device
    mine = encode_on_gpu(st, texts, 16)  # 6 batches: more than the helper thread prefetches
    theirs = st.encode(texts, batch_size=16, convert_to_numpy=True, normalize_embeddings=True)
    assert mine.dtype == np.float32 and mine.shape == (len(texts), 384)
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    assert encode_on_gpu(st, [], 16).shape == (0, 384)


def _varied_texts() -> list[str]:
    rng = np.random.default_rng(5)
    topic = np.where(rng.random(60) < 0.6, rng.integers(0, len(TOPIC_PHRASES), 60), -1)
    return sorted(list(realistic_texts(topic, rng)) + [
        "", "  ", "x" * 2000, "word " * 400, "Ünïcödé — “quotes” ☃ 🙂 naïve café", "東京 では 雨", "tab\there\nnewline",
        "a literal [PAD] and [SEP] and [CLS] in the text", "[PAD]", "can't won't y'all", "https://example.org/a?b=c"],
        key=len, reverse=True)


def test_the_rust_tokenizer_gives_exactly_what_preprocess_gives():
    import torch

    st = load_model(device="cpu")
    texts = _varied_texts()
    fast = backend_tokeniser(st)
    for lo in range(0, len(texts), 16):  # longest first, as encode_on_gpu batches: truncation, padding, empties
        batch = texts[lo:lo + 16]
        mine, theirs = fast(batch), st.preprocess(batch)
        assert mine.keys() == theirs.keys()
        for key, value in theirs.items():
            if isinstance(value, torch.Tensor):
                assert value.dtype == mine[key].dtype and torch.equal(value, mine[key]), (lo, key)
            else:
                assert mine[key] == value, (lo, key)
    assert fast(["word " * 400])["input_ids"].shape == (1, st.max_seq_length)  # truncated to the model's length
    assert text_tokeniser(st, [texts[:16], texts[-16:]]).__name__ == "tokenise"  # checked, so used


def test_a_tokenizer_that_pads_otherwise_falls_back_to_preprocess():
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(resolve_model_path(DEFAULT_MODEL), device="cpu").eval()  # its own copy: changed below
    texts = _varied_texts()
    assert text_tokeniser(st, [texts[:8], texts[-8:]]).__name__ == "tokenise"  # the Rust path, as configured
    st.tokenizer.padding_side = "left"  # preprocess now pads on the left; the Rust copy would not
    prepare = text_tokeniser(st, [texts[:8], texts[-8:]])
    assert prepare == st.preprocess
    np.testing.assert_allclose(encode_on_gpu(st, texts, 8),
                               st.encode(texts, batch_size=8, convert_to_numpy=True, normalize_embeddings=True),
                               atol=1e-5)


def test_embedding_says_what_it_will_do_and_the_time_left(tmp_path, caplog):
    """Embedding a month of comments can take hours on a CPU: a line before the first block, and each block's line
    with the time left."""
    from flows.lib.reddit.embed import embed

    texts = ["a first text", "a second one", "a first text", "and a third", "the fourth", "the fifth", "a sixth"]
    with caplog.at_level("INFO", logger="flows.embed"):
        vecs, stats = embed(texts[:2], tmp_path, device="cpu", key=b"k" * 32)  # two cached before
        caplog.clear()
        vecs, stats = embed(texts, tmp_path, device="cpu", shard_size=3, key=b"k" * 32)
    assert vecs.shape == (7, 384) and stats == {"texts": 7, "unique": 6, "embedded": 4, "cached": 2}
    lines = [r.getMessage() for r in caplog.records if r.name == "flows.embed"]
    assert lines[0].startswith("embedding 4 new texts (of 6 unique, 2 from the cache) with ") and \
        lines[0].endswith(" on cpu, 3 a block")
    assert lines[1].startswith("embedded 3 of 4 new texts in ") and " left (near " in lines[1]
    assert lines[2].startswith("embedded 4 of 4 new texts in ")


def test_ctrl_c_ends_a_block_at_its_next_batch_and_caches_none_of_it(tmp_path):
    """A block is 50,000 texts, minutes on a CPU: Ctrl-C in a command (``interrupts.stop_all``, which
    its SIGINT handler calls) while a flow's task thread embeds ends the block before its next batch,
    and none of the block is cached."""
    from flows.lib.infra import interrupts
    from flows.lib.reddit.embed import embed

    st = load_model(DEFAULT_MODEL, "cpu")  # the model embed uses: loaded once per process and device
    batches = []

    def ctrl_c_during_the_first_batch(module, args):
        batches.append(1)
        if len(batches) == 1:
            interrupts.stop_all()

    texts = realistic_texts(np.arange(64) % 4 - 1, np.random.default_rng(3))
    hook = st.register_forward_pre_hook(ctrl_c_during_the_first_batch)
    try:
        with pytest.raises(interrupts.Interrupted, match="^embedding: interrupted$"):
            embed(texts, tmp_path / "cache", device="cpu", batch_size=8, key=b"k" * 32)
    finally:
        hook.remove()
        interrupts.reset()
    assert len(batches) == 1  # of 8
    assert not list((tmp_path / "cache").rglob("shard-*"))
    assert not st._forward_pre_hooks  # the command's hook is gone with it
    vecs, stats = embed(texts[:4], tmp_path / "cache", device="cpu", key=b"k" * 32)  # and it embeds again
    assert vecs.shape == (4, 384) and stats["embedded"] == len(set(texts[:4]))
