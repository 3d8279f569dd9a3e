"""The embedding model's files are checked against pinned sha256 before use."""

import shutil

import pytest

from flows.lib.reddit import embed


def test_the_installed_default_model_matches_its_pins():
    path = embed.resolve_model_path(embed.DEFAULT_MODEL)
    assert (embed.Path(path) / "model.safetensors").is_file()
    assert (path, embed.DEFAULT_MODEL) in embed._verified


@pytest.mark.bad_input
def test_a_changed_file_is_refused_naming_it(tmp_path):
    src = embed.Path(embed.resolve_model_path(embed.DEFAULT_MODEL))
    copy = tmp_path / "model"
    shutil.copytree(src, copy)
    vocab = copy / "vocab.txt"
    vocab.write_text(vocab.read_text().replace("[UNK]", "[UNX]", 1))
    with pytest.raises(ValueError, match=r"model/vocab\.txt: sha256 .* differs from the pinned .*reinstall"):
        embed.verify_model_files(copy, embed.PINNED_SHA256[embed.DEFAULT_MODEL])
    (copy / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json: missing"):
        embed.verify_model_files(copy, {"tokenizer.json": "0" * 64})
