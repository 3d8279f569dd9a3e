import os

import pytest

from flows.lib.infra import stage_cache


def test_fingerprint_follows_content_names_and_skips_hidden(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    (d / "a.csv").write_text("1,2\n")
    first = stage_cache.fingerprint(d)
    (d / ".work").mkdir()
    (d / ".work" / "x").write_text("scratch")
    (d / ".stage.json").write_text("{}")
    assert stage_cache.fingerprint(d) == first
    (d / "a.csv").write_text("1,3\n")
    assert stage_cache.fingerprint(d) != first
    (d / "a.csv").write_text("1,2\n")
    assert stage_cache.fingerprint(d) == first
    os.rename(d / "a.csv", d / "b.csv")
    assert stage_cache.fingerprint(d) != first
    with pytest.raises(FileNotFoundError, match="missing"):
        stage_cache.fingerprint(tmp_path / "missing")


def test_large_files_are_fingerprinted_by_size_and_mtime(tmp_path, monkeypatch):
    monkeypatch.setattr(stage_cache, "CONTENT_LIMIT", 4)
    f = tmp_path / "big.bin"
    f.write_bytes(b"0123456789")
    first = stage_cache.fingerprint(f)
    f.write_bytes(b"9876543210")
    os.utime(f, ns=(1, 1))
    assert stage_cache.fingerprint(f) != first


def test_stage_key_and_stamp(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("x")
    code = stage_cache.code_version("flows.lib.standin.synthetic", "sql/mimic")
    key = stage_cache.stage_key({"src": src}, {"n": 1}, code)
    assert key == stage_cache.stage_key({"src": src}, {"n": 1}, code)
    assert key != stage_cache.stage_key({"src": src}, {"n": 2}, code)
    assert key != stage_cache.stage_key({"src": src}, {"n": 1}, stage_cache.code_version("cet_model.censoring"))
    out = tmp_path / "out"
    out.mkdir()
    assert not stage_cache.is_current(out, key)
    stage_cache.record(out, key, stage="demo")
    assert stage_cache.is_current(out, key)
    src.write_text("y")
    assert not stage_cache.is_current(out, stage_cache.stage_key({"src": src}, {"n": 1}, code))
    (out / stage_cache.STAMP).write_text("not json")
    assert not stage_cache.is_current(out, key)
    with pytest.raises(FileNotFoundError, match="nothing found"):
        stage_cache.code_version("cet_model.no_such_module")


def test_only_a_dead_writers_leftovers_are_removed(tmp_path):
    import os
    import subprocess
    import sys

    from cet_model.atomic import remove_dead_leftovers

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead, live = tmp_path / f".X.parquet.tmp-{gone.pid}", tmp_path / f".X.parquet.tmp-{os.getpid()}"
    dead_dir = tmp_path / f".incoming-{gone.pid}-ab_12x"
    for p in (dead, live):
        p.write_text("half")
    dead_dir.mkdir()
    (tmp_path / "X.parquet").write_text("finished")
    assert remove_dead_leftovers(tmp_path, ".X.parquet.tmp-*") == 1
    assert remove_dead_leftovers(tmp_path, ".incoming-*") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "X.parquet"])


def test_whole_file_and_dataset_writers_sweep_a_dead_writers_temporaries(tmp_path):
    import os
    import subprocess
    import sys

    from cet_model.atomic import write_text
    from flows.lib.standin import synthetic

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead_file = tmp_path / f".report.md.tmp-{gone.pid}-abc_123"
    live_file = tmp_path / f".report.md.tmp-{os.getpid()}-xyz_987"
    dead_dir = tmp_path / f".syn.tmp-{gone.pid}-q1w2e3r4"
    for p in (dead_file, live_file):
        p.write_text("half")
    dead_dir.mkdir()
    write_text(tmp_path / "report.md", "whole")
    synthetic.write(tmp_path / "syn", "independent", n=120, split_sizes=(60, 30, 30))
    synthetic.write(tmp_path / "syn", "independent", n=120, split_sizes=(60, 30, 30))  # replaces it
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live_file.name, "report.md", "syn"])
    assert (tmp_path / "report.md").read_text() == "whole"


def test_report_figures_are_inlined_for_the_prefect_ui(tmp_path):
    import base64

    from flows.lib.modeling.report import inline_figures

    png = b"\x89PNG fake"
    (tmp_path / "a-auc.png").write_bytes(png)
    md = "x ![a AUC](a-auc.png) ![gone](missing.png) ![web](https://e.org/x.png)"
    out = inline_figures(md, tmp_path)
    assert f"![a AUC](data:image/png;base64,{base64.b64encode(png).decode()})" in out
    assert "![gone](missing.png)" in out and "![web](https://e.org/x.png)" in out
