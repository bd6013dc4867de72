"""The ``framelab`` console script: lazily assembles the commands of ``webapp`` and ``analysis``."""

from __future__ import annotations

import importlib

import click

# Which package provides which commands. Each package keeps its own ``COMMANDS`` mapping so the
# command list lives next to the code; this module only merges them.
_PROVIDERS = {
    # Looked up last (the last provider wins): only its own commands import it.
    "framelab.commands": "the web platform and the research package "
    "(pip install 'framelab[analysis]')",
    "webapp.cli": "the web platform (pip install framelab)",
    "analysis.cli": "the research package (pip install 'framelab[analysis]' or '[llm]')",
}


def _specs() -> dict[str, tuple[str, str]]:
    specs: dict[str, tuple[str, str]] = {}
    for provider, needs in _PROVIDERS.items():
        module = importlib.import_module(provider)
        for name, target in module.COMMANDS.items():
            specs[name] = (target, needs)
    return specs


def _spec(name: str) -> tuple[str, str] | None:
    """Return one command's spec, importing a later provider only if the earlier ones lack it.

    Same answer as ``_specs().get(name)`` (the last provider wins), but ``framelab analyze``
    never imports ``webapp.cli`` and with it Flask (0.3 s of every analysis command's start).
    """
    for provider, needs in reversed(_PROVIDERS.items()):
        target = importlib.import_module(provider).COMMANDS.get(name)
        if target is not None:
            return target, needs
    return None


def _resolve(target: str) -> click.Command:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


class _LazyGroup(click.Group):
    """Import a command's module only when that command runs (or ``--help`` lists it)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_specs())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _spec(cmd_name)
        if spec is None:
            return None
        target, needs = spec
        try:
            return _resolve(target)
        except ImportError as exc:  # an optional extra is missing: say which one
            if (exc.name or "").split(".")[0] in {"webapp", "analysis", "framelab"}:
                raise  # our own code is broken: show the real error
            return _unavailable(cmd_name, needs, exc.name)


def _unavailable(name: str, needs: str, missing: str | None) -> click.Command:
    """A command whose extra is not installed: listed by ``--help`` (which must not fail on
    a web-only install), and saying what to install when it runs."""
    message = f"`framelab {name}` needs {needs}; missing module: {missing}"

    def refuse(args: tuple[str, ...]) -> None:
        raise click.ClickException(message)

    return click.Command(
        name,
        callback=refuse,
        params=[click.Argument(["args"], nargs=-1, type=click.UNPROCESSED)],
        help=message,
        short_help=f"Not installed: needs {needs.split(' (')[0]}.",
        context_settings={"ignore_unknown_options": True},
        add_help_option=False,
    )


@click.group(cls=_LazyGroup)
@click.version_option(package_name="framelab")
@click.pass_context
def main(ctx: click.Context) -> None:
    """FrameLab: run framing studies with people and measure what LLM text changes."""
    spec = _spec(ctx.invoked_subcommand) if ctx.invoked_subcommand else None
    if spec is not None and spec[0].startswith("analysis."):
        # An analysis command: no Flask app to find, no Flask import. `analyze --prereg` may
        # ask for the console's record of a pre-registration; this reads it, importing the web
        # app only then (the research package itself never does).
        from analysis.cli import CONSOLE_RECORD
        from framelab.console_record import console_record

        ctx.meta[CONSOLE_RECORD] = console_record
        return
    from flask.cli import ScriptInfo

    # Web commands use flask.cli.with_appcontext, which finds the app through ScriptInfo.
    ctx.obj = ScriptInfo(create_app=_create_app)


def _create_app():
    from webapp import create_app

    return create_app()
