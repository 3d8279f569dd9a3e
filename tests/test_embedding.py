"""The GPU's embedding steps (``encode_on_gpu``: longest first, batches tokenised ahead on a
helper thread, vectors gathered back into the texts' order) checked on the CPU with the packaged
model: with the same batches they must give exactly what sentence-transformers' ``encode`` gives.
On a GPU, tests/test_gpu_embedding.py compares them with the CPU's fp32 vectors."""

import numpy as np

from flows.lib.reddit.embed import encode_on_gpu, load_model
from flows.lib.standin.reddit_text import TOPIC_PHRASES, realistic_texts


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
