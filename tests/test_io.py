import json

import pytest

from psnlib.io import atomic_directory, atomic_write_json


def test_atomic_json_roundtrip_leaves_no_temp_files(tmp_path):
    path = atomic_write_json(tmp_path / "a" / "m.json", {"x": 1})
    assert json.loads(path.read_text()) == {"x": 1}
    assert [p.name for p in path.parent.iterdir()] == ["m.json"]


def test_atomic_directory_keeps_old_content_on_failure(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_directory(target) as tmp:
        (tmp / "w.txt").write_text("v1")
    with pytest.raises(RuntimeError), atomic_directory(target) as tmp:
        (tmp / "w.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert (target / "w.txt").read_text() == "v1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
