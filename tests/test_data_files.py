"""The committed files under data/countdown/ are exactly the splits the code generates."""

from psnlib.replication.report.export import DATA_DIR, main, split_files


def test_committed_splits_regenerate_byte_for_byte(tmp_path):
    assert main(["--out", str(tmp_path)]) == 0
    names = sorted(split_files())
    assert sorted(p.name for p in DATA_DIR.glob("*.jsonl")) == names, "rerun the export"
    for name in names:
        assert (tmp_path / name).read_bytes() == (DATA_DIR / name).read_bytes(), name
