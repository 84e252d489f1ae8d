"""``minihpc submit --tree DIR``: the job's working tree packed, capped and unpacked safely."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from minihpc.client import tree
from minihpc.core.errors import UsageError


def _project(root):
    root.mkdir()
    (root / "pkg").mkdir()
    (root / "pkg" / "util.py").write_text("X = 1\n")
    (root / "train.sh").write_text("#!/bin/bash\necho hi\n")
    (root / "train.sh").chmod(0o755)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref\n")
    (root / "link").symlink_to("/etc/passwd")
    return root


def test_a_tree_travels_with_its_files_and_modes_but_no_links_or_history(tmp_path):
    data = tree.pack(str(_project(tmp_path / "proj")))
    assert tree.read_member(data, "./train.sh") == "#!/bin/bash\necho hi\n"
    dest = tmp_path / "spool" / "tree"
    os.makedirs(dest.parent)
    tree.unpack(data, str(dest))
    assert (dest / "pkg" / "util.py").read_text() == "X = 1\n"
    assert os.stat(dest / "train.sh").st_mode & 0o777 == 0o555
    assert os.stat(dest / "pkg" / "util.py").st_mode & 0o777 == 0o444
    assert not (dest / "link").exists() and not (dest / ".git").exists()


def test_a_script_not_in_the_tree_is_one_line(tmp_path):
    data = tree.pack(str(_project(tmp_path / "proj")))
    with pytest.raises(UsageError, match="'missing.sh' is not a file in the working tree"):
        tree.read_member(data, "missing.sh")
    with pytest.raises(UsageError, match="is not a directory"):
        tree.pack(str(tmp_path / "nowhere"))


def _archive(**members: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name.replace("__", "/").replace("UP", ".."))
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def test_an_archive_reaching_outside_its_root_is_refused_and_nothing_is_written(tmp_path):
    bad = _archive(ok=b"1", UP__escape=b"2")
    with pytest.raises(UsageError, match="outside its root"):
        tree.unpack(bad, str(tmp_path / "dest"))
    assert not (tmp_path / "dest").exists() and not (tmp_path / "escape").exists()
    with pytest.raises(UsageError, match="not a tar archive"):
        tree.unpack(b"not a tar", str(tmp_path / "dest"))


def test_trees_are_capped(tmp_path, monkeypatch):
    monkeypatch.setattr(tree, "TREE_MAX", 10)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "data.bin").write_bytes(b"x" * 11)
    with pytest.raises(UsageError, match="holds over"):
        tree.pack(str(tmp_path / "big"))
    with pytest.raises(UsageError, match="holds over"):
        tree.unpack(_archive(a=b"x" * 11), str(tmp_path / "dest"))
