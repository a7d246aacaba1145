"""Temporary git repositories with real commits for the diff and baseline tests.

Git runs isolated from the machine's configuration (no global or system config, a fixed author and
dates), always inside the test's own temporary directory."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import SHIPPED_DATA

GIT_ENV = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Curator",
    "GIT_AUTHOR_EMAIL": "curator@example.org",
    "GIT_COMMITTER_NAME": "Curator",
    "GIT_COMMITTER_EMAIL": "curator@example.org",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def isolate_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make git (ours and sotakg's) ignore the machine's git configuration."""
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (isolated), failing the test on an error; its standard output."""
    env = dict(os.environ, **GIT_ENV)
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def empty_repository(root: Path, folder: str | None = None) -> Path:
    """An empty repository (branch main) at ``root``, with ``folder`` made inside it if given."""
    (root / folder if folder else root).mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    return root


def new_repository(root: Path) -> Path:
    """A repository at ``root`` whose first commit (branch main) holds the shipped data in ``data/``."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    shutil.copytree(SHIPPED_DATA, root / "data")
    commit(root, "the shipped anthology")
    return root


def commit(repo: Path, message: str) -> str:
    """Commit everything in the work tree; the new commit's id."""
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def set_fields(path: Path, **fields: str | None) -> None:
    """Set (or with None remove) top-level fields of a record file, keeping the others in place."""
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = []
    for line in lines:
        name = line.split(":", 1)[0]
        if name in fields:
            if fields[name] is not None:
                kept.append(f"{name}: {fields.pop(name)}")
            else:
                fields.pop(name)
            continue
        kept.append(line)
    kept += [f"{name}: {value}" for name, value in fields.items() if value is not None]
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
