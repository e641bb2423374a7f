"""The migrations of an earlier release, for the upgrade tests: a folder holding the checkout's
migration files up to one version, and no sql/definitions/ (today's definitions read today's
tables): such a database holds the functions and triggers the historical migrations defined."""

from __future__ import annotations

import shutil
from pathlib import Path

from backscroll.store.migrate import migrations_root


def migrations_through(tmp_path: Path, last: int) -> Path:
    """A folder under `tmp_path` with migrations 1..`last` (as `migrate(url, directory=...)` takes)."""
    folder = tmp_path / "sql"
    folder.mkdir()
    for path in migrations_root().glob("*.sql"):
        if int(path.name[:4]) <= last:
            shutil.copy(path, folder / path.name)
    return folder
