"""``framelab recruit SLUG ACTION``: the recruiter from the command line (plan first, then
confirm what it costs)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import click
from flask.cli import with_appcontext

from webapp.recruit import ACTIONS

# Actions that spend or commit money: shown with their cost and confirmed first.
_COSTLY = {"create", "publish", "approve", "bonus"}


@click.command("recruit")
@click.argument("slug")
@click.argument("action", type=click.Choice(ACTIONS))
@click.argument("participants", nargs=-1)
@click.option(
    "--url",
    "base_url",
    default=None,
    help="Public https:// address of this platform (create; default $FRAMELAB_PUBLIC_URL).",
)
@click.option("--yes", is_flag=True, help="Do it without asking (the cost is still printed).")
@click.option("--dry-run", is_flag=True, help="Print what would be done and spent; do nothing.")
@click.option("--reason", default="", help="reject: the message the participant reads.")
@click.option("--category", default="OTHER", show_default=True, help="reject: Prolific's category.")
@click.option(
    "--production", is_flag=True, help="MTurk: the live marketplace (default: the sandbox)."
)
@click.option(
    "--retry-refused",
    is_flag=True,
    help="settle: make bonuses the platform refused new again (once their cause is fixed).",
)
@click.option(
    "--release",
    "release",
    multiple=True,
    metavar="CODE",
    help=(
        "settle (Prolific): after you checked on Prolific that this participant's unsettled "
        "payment was not made, make it payable again (repeat for several)."
    ),
)
@with_appcontext
def recruit(
    slug: str,
    action: str,
    participants: tuple[str, ...],
    base_url: str | None,
    yes: bool,
    dry_run: bool,
    reason: str,
    category: str,
    production: bool,
    retry_refused: bool,
    release: tuple[str, ...],
) -> None:
    """Run the study on its recruiter (the YAML's recruiter: block): plan, create, publish,
    status, approve, reject PARTICIPANT..., bonus, settle, pause, close.

    Costly actions (create, publish, approve, bonus) print what they will spend and ask first;
    --dry-run stops there. approve and bonus then do exactly the rows their preview printed:
    if any changed meanwhile nothing is done and the new preview is printed. settle resolves
    what an interrupted run left open (a create or publish whose answer was lost, payments of
    unknown outcome) against the platform and pays nothing. The token (PROLIFIC_TOKEN) or AWS
    credentials come from the environment and are never printed or logged.
    """
    from webapp.recruit import get_recruiter
    from webapp.recruit.base import ConfirmationChanged, RecruitError
    from webapp.services.studies import get_study

    s = get_study(slug)
    if s is None:
        raise click.ClickException(f"no study {slug!r}; load it with `framelab study load`")
    try:
        r = get_recruiter(s, actor="cli", production=production)
        if action == "plan":
            _echo(r.plan().lines)
            return
        # Before the cost and its question: a "yes" must not be asked for a create that cannot run.
        url = base_url or os.environ.get("FRAMELAB_PUBLIC_URL", "")
        if action == "create" and not url and not dry_run:
            raise click.ClickException("give --url https://HOST (or set FRAMELAB_PUBLIC_URL)")
        if action in _COSTLY:
            preview = {
                "create": r.plan,
                "publish": r.plan,
                "approve": lambda: r.approval_plan()[0],
                "bonus": r.bonus_plan,
            }[action]()
            _echo(preview.lines)
            if dry_run:
                if action == "create" and not url:
                    click.echo("note: create needs --url https://HOST (or FRAMELAB_PUBLIC_URL)")
                click.echo("dry run: nothing was sent")
                return
            if not yes:
                # No transaction waits on the researcher's answer (on SQLite it would hold the
                # write lock and stall the participants' pages meanwhile).
                r.release()
                click.confirm(
                    f"{action} on {r.label}{_spend(action, preview, r.cents)}?", abort=True
                )
        if action in ("approve", "bonus"):
            try:
                report = getattr(r, action)(confirmed=preview.confirmation)
            except ConfirmationChanged as exc:
                _echo(["", "changed since the preview above; now:", *exc.preview.lines])
                raise click.ClickException(f"{exc}; run the command again") from None
        elif action == "create":
            report = r.create(url)
        elif action == "settle":
            report = r.settle(retry_refused=retry_refused, release=frozenset(release))
        elif action == "reject":
            if not participants:
                raise click.ClickException("name the participants to reject (their p_… codes)")
            if not yes and not dry_run:
                click.confirm(f"reject {len(participants)} submission(s)?", abort=True)
            if dry_run:
                click.echo("dry run: nothing was sent")
                return
            report = r.reject(participants, reason, category)
        elif action == "status":
            report = r.status()[0]
        else:
            report = getattr(r, action)()
    except RecruitError as exc:
        raise click.ClickException(str(exc)) from None
    _echo(report.lines)


def _spend(action: str, preview: Any, cents: Callable[[int], str]) -> str:
    """What the confirmation names: what this action pays now (bonus: the bonuses and their
    fees; approve: the rewards; create and publish: the listing's whole cost, at most)."""
    counts = preview.counts
    if action == "bonus":
        return f" ({cents(counts['to_pay_cents'])} + {cents(counts['to_pay_fees_cents'])} fees now)"
    if action == "approve":
        return f" ({cents(counts['cost_cents'])} in rewards, plus fees)"
    return f" (up to {cents(preview.cost.total)})" if preview.cost else ""


def _echo(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)
