"""The ``framelab`` console script: lazily assembles the commands of ``webapp`` and ``analysis``."""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass

import click

# Which package provides which commands, what installs it, and the third-party packages its
# commands cannot run without. Each package keeps its own ``COMMANDS`` mapping (name ->
# ("module:attribute", short help)) in a module free of imports, so the command list lives next
# to the code and ``framelab --help`` lists every command without importing Flask or pandas.
_PROVIDERS: dict[str, tuple[str, tuple[str, ...]]] = {
    # Looked up last (the last provider wins): only its own commands import it.
    "framelab.commands": (
        "the web platform and the research package (pip install 'framelab[analysis]')",
        ("flask", "pandas"),
    ),
    "webapp.commands": ("the web platform (pip install framelab)", ("flask",)),
    "analysis.cli": (
        "the research package (pip install 'framelab[analysis]' or '[llm]')",
        ("pandas",),
    ),
}


@dataclass(frozen=True)
class Spec:
    """Where a command lives, its short help, and what it needs when not installed."""

    target: str
    help: str
    needs: str
    missing: str | None  # the first required package that is not installed

    @property
    def listed_help(self) -> str:
        """What ``framelab --help`` says about the command."""
        return f"Not installed: needs {self.needs.split(' (')[0]}." if self.missing else self.help


def _missing(modules: tuple[str, ...]) -> str | None:
    # find_spec looks the package up without importing it (pandas alone is 0.4 s of CPU).
    return next((m for m in modules if importlib.util.find_spec(m) is None), None)


def _specs() -> dict[str, Spec]:
    specs: dict[str, Spec] = {}
    for provider, (needs, modules) in _PROVIDERS.items():
        missing = _missing(modules)
        for name, (target, short) in importlib.import_module(provider).COMMANDS.items():
            specs[name] = Spec(target, short, needs, missing)
    return specs


def _spec(name: str) -> Spec | None:
    """Return one command's spec, importing a later provider only if the earlier ones lack it.

    Same answer as ``_specs().get(name)`` (the last provider wins).
    """
    for provider, (needs, modules) in reversed(_PROVIDERS.items()):
        found = importlib.import_module(provider).COMMANDS.get(name)
        if found is not None:
            return Spec(found[0], found[1], needs, _missing(modules))
    return None


def _resolve(target: str) -> click.Command:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


class _LazyGroup(click.Group):
    """Import a command's module only when that command runs; ``--help`` imports none."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_specs())

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        specs = _specs()
        if not specs:
            return
        limit = formatter.width - 6 - max(len(name) for name in specs)
        # Click shortens a command's help to fit; a stand-in command shortens the listed text.
        rows = [
            (name, click.Command(name, help=spec.listed_help).get_short_help_str(limit))
            for name, spec in sorted(specs.items())
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        spec = _spec(cmd_name)
        if spec is None:
            return None
        if spec.missing:
            return _unavailable(cmd_name, spec.needs, spec.missing)
        try:
            return _resolve(spec.target)
        except ImportError as exc:  # an optional extra is missing: say which one
            if (exc.name or "").split(".")[0] in {"webapp", "analysis", "framelab"}:
                raise  # our own code is broken: show the real error
            return _unavailable(cmd_name, spec.needs, exc.name)


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
    if spec is not None and spec.target.startswith("analysis."):
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
