"""The signing keys: create one, show which are in use, vouch for history written before signing.

Decisions, policy settings and policy exports are signed with a key kept
outside the store (docs/governance.md, "Signed decisions").
"""

from __future__ import annotations

import click

from fieldtrust.cli.common import AS_HELP, acting_user, open_db
from fieldtrust.cli.terminal import echo
from fieldtrust.store import signing


@click.group("keys", epilog="Example: fieldtrust keys create ~/.config/fieldtrust/signing.key")
def keys_group() -> None:
    """The key decisions and policy exports are signed with, and the keys trusted to check them."""


@keys_group.command(
    "create", epilog="Example: fieldtrust keys create /etc/fieldtrust/signing.key"
)
@click.argument("path", type=click.Path(dir_okay=False))
def keys_create(path: str) -> None:
    """Create a signing key at PATH (readable by you only) and its public half at PATH.pub.

    Keep PATH outside the store's folder, on the machines that record decisions
    (the dashboard's server, the managers' command line), and give PATH.pub to
    whoever checks: auditors and production. An existing file is never
    overwritten.
    """
    key = signing.create_key(path)
    echo(f"created signing key {key.key_id}: {path} (private) and {path}.pub (public)")
    echo(f"\nSign with it:   signing_key_file = \"{path}\"  in fieldtrust.toml"
               f" (or export {signing.KEY_ENV}={path})")
    echo(f"Check with it:  trusted_key_files = \"{path}.pub\"  where only checking happens")


@keys_group.command("show", epilog="Example: fieldtrust keys show")
def keys_show() -> None:
    """Which key this command line signs with and which keys it trusts (their ids)."""
    path = signing.signing_key_path()
    if path is None:
        echo("signing key: none (setting signing_key_file; `fieldtrust keys create PATH`)")
    else:
        echo(f"signing key: {signing.load_signing_key(path).key_id} ({path})")
    trusted = signing.trusted_keys()
    echo("trusted keys: " + (", ".join(sorted(trusted.keys)) or "none"))


@keys_group.command(
    "vouch",
    epilog="Example: fieldtrust keys vouch --as root --comment 'matches the 2026-11-30 backup'",
)
@click.option("--as", "actor", default=None, metavar="NAME", help=AS_HELP)
@click.option("--comment", required=True, help="What you checked before vouching (kept).")
@click.pass_context
def keys_vouch(ctx: click.Context, actor: str | None, comment: str) -> None:
    """Vouch, as an admin holding the signing key, for decisions and policy settings written
    before this store signed them.

    `fieldtrust verify` names each such row until an admin vouches; check them
    first (against a policy file or head kept outside the store: `fieldtrust
    verify --policy FILE`). Refused when the history has any other problem.
    """
    from fieldtrust.store.vouching import vouch_for_history

    actor = acting_user(ctx, actor, what="vouching")
    vouch = vouch_for_history(open_db(ctx), actor, comment)
    echo(f"{vouch.signed_by} vouched for the history up to chain entry {vouch.seq}"
               f" ({vouch.entries} unsigned decisions and policy settings), key {vouch.key_id}")


def register(group: click.Group) -> None:
    group.add_command(keys_group)
