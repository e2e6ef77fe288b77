"""The manifest's rollout source digest (EVAL.md §8), computed as the official tool does."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from core.eval.results.source_digest import EMPTY_SOURCE_DIGEST, rollout_source_digest


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for relative, data in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _expected(files: list[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for relative, data in files:
        digest.update(relative.encode() + data)
    return digest.hexdigest()


def test_the_digest_is_path_then_bytes_in_component_order(tmp_path: Path) -> None:
    root = _tree(
        tmp_path / "rollout",
        {"main.py": b"print(1)\n", "a-b/x": b"2", "a/x": b"1", ".env": b"K=v", "é.py": b"e"},
    )
    # Component order: "a" < "a-b" as components, though "a-b/x" < "a/x" as strings.
    assert rollout_source_digest(root) == _expected(
        [(".env", b"K=v"), ("a/x", b"1"), ("a-b/x", b"2"), ("main.py", b"print(1)\n"),
         ("é.py", b"e")]
    )  # fmt: skip


def test_what_running_a_rollout_writes_into_its_folder_does_not_count(tmp_path: Path) -> None:
    root = _tree(tmp_path / "rollout", {"main.py": b"code"})
    before = rollout_source_digest(root)
    _tree(
        root,
        {
            ".venv/lib/site.py": b"x",
            "uv.lock": b"lock",
            "demo.egg-info/PKG-INFO": b"x",
            "__pycache__/main.cpython-312.pyc": b"x",
            "sub/node_modules/m.js": b"x",
            "sub/build": b"a file named build is left out too",
            ".git/HEAD": b"x",
            "out/run/events.jsonl": b"x",
        },
    )
    assert rollout_source_digest(root, exclude=root / "out") == before
    assert rollout_source_digest(root) != before  # out/ counts unless it is the output


def test_a_file_symlink_counts_with_its_target_and_a_folder_symlink_is_refused(
    tmp_path: Path,
) -> None:
    root = _tree(tmp_path / "rollout", {"main.py": b"code"})
    (root / "link.py").symlink_to(root / "main.py")
    assert rollout_source_digest(root) == _expected([("link.py", b"code"), ("main.py", b"code")])
    (root / "data").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="symlink"):
        rollout_source_digest(root)
    (root / "data").unlink()
    (root / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="symlink"):
        rollout_source_digest(root)


def test_a_missing_folder_has_the_empty_digest(tmp_path: Path) -> None:
    assert rollout_source_digest(tmp_path / "nowhere") == EMPTY_SOURCE_DIGEST
    assert hashlib.sha256(b"").hexdigest() == EMPTY_SOURCE_DIGEST
