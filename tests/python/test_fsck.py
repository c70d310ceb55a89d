"""txvfs.fsck: the core's integrity check from Python (issue 14: C and Python get it too)."""

import os

import pytest
import txvfs


def test_a_clean_store_checks_clean(tmp_path):
    path = str(tmp_path / "store")
    with txvfs.open(path) as store:
        store.makedirs("/a/b")
        for i in range(20):
            store.write_bytes(f"/a/b/f{i}", os.urandom(i * 700))
        store.symlink("/a/b/f1", "/link")
    report = txvfs.fsck(path)
    assert isinstance(report, txvfs.FsckReport)
    assert report.clean and report.problems == []
    assert report.keys_read > 20
    assert str(report)  # the report as `txvfs fsck` prints it


def test_no_store_there_is_file_not_found_and_creates_nothing(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError):
        txvfs.fsck(str(missing))
    assert not missing.exists()
