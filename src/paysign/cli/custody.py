"""Key custody operations: ``paysign admin rotate-master-key``, ``paysign backup DEST`` and
``paysign restore SRC`` (docs/deploy.md: "Master-key rotation", "Backups and restore")."""

from __future__ import annotations

from pathlib import Path

import click

from paysign.cli._common import emit, run, runtime
from paysign.clock import SystemClock
from paysign.config import Settings
from paysign.custody import EnvelopeVault
from paysign.services import backups
from paysign.services.key_custody import rotate_master_key
from paysign.store.database import Database


@click.command("rotate-master-key")
def rotate_master_key_command() -> None:
    """Re-wrap every stored secret from PAYSIGN_PREVIOUS_MASTER_KEYS to PAYSIGN_MASTER_KEY.

    Safe while the service runs with both keys configured; run it again if it was interrupted.
    """

    def act() -> None:
        rt = runtime()  # refuses to start unless the configured keys open every stored secret
        if not isinstance(rt.vault, EnvelopeVault):
            raise click.ClickException("this vault cannot re-wrap its secrets")
        report = rotate_master_key(rt.db, rt.vault)
        emit(report.as_dict())
        click.echo(
            f"Every secret is now wrapped by master key {report.kek_id}. Remove "
            "PAYSIGN_PREVIOUS_MASTER_KEYS from every process's settings and restart them; keep "
            "the new key apart from the backups, and destroy the old key once no backup you "
            "keep needs it.",
            err=True,
        )

    run(act)


@click.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
def backup_command(dest: Path) -> None:
    """Copy the SQLite database to DEST (a file, or a directory to put a new file in) while the
    service runs. The master key is not in the copy: keep it elsewhere."""

    def act() -> None:
        settings = Settings()
        made = backups.backup(settings, dest, now=SystemClock().now())
        emit(
            {
                "backup": str(made.path),
                "bytes": made.size,
                "masterKeyIds": made.master_key_ids,
            }
        )
        click.echo(backups.key_notice(settings), err=True)

    run(act)


@click.command("restore")
@click.argument("src", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def restore_command(src: Path) -> None:
    """Restore the backup SRC into the data directory (PAYSIGN_DATA_DIR), which must hold no
    database. Put the master key back too: the service does not start without it."""

    def act() -> None:
        settings = Settings()
        restored = backups.restore(settings, src)
        if restored.key_in_place:
            db = Database(f"sqlite:///{restored.path}")
            backups.require_key_opens(settings, restored, db)
            db.dispose()
        emit(
            {
                "restored": str(restored.path),
                "masterKeyIds": restored.master_key_ids,
                "masterKeyChecked": restored.key_in_place,
            }
        )
        if not restored.key_in_place:
            click.echo(
                "Now put the master key back (PAYSIGN_MASTER_KEY, or "
                f"{settings.data_dir}/master.key with mode 0600): its id must be one of "
                f"{', '.join(restored.master_key_ids) or 'none'}. The service will not start "
                "without it.",
                err=True,
            )

    run(act)


CUSTODY_ADMIN_COMMANDS = (rotate_master_key_command,)
CUSTODY_COMMANDS = (backup_command, restore_command)
