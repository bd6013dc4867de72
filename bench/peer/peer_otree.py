"""oTree's side of the peer benchmark: its virtualenv, its production server, its audit.

oTree is not a FrameLab dependency: :func:`ensure_otree` installs the pinned version into
``bench/peer/.venv-otree`` with the interpreter running the benchmark. :class:`OTreeServer`
builds the database (``otree resetdb``), creates one session of N participants
(``otree create_session``) and runs ``otree prodserver``, oTree's documented production server.
:func:`audit_otree` compares oTree's tables with the bots' log the way
``bench/loadtest_audit.py`` does for FrameLab.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
from common import free_port, stop_group

HERE = Path(__file__).resolve().parent
PROJECT = HERE / "otree_project"
ROOT = HERE.parents[1]


def ensure_otree(venv: Path) -> Path:
    """The ``bin`` folder of a virtualenv holding the pinned oTree; created when missing."""
    bin_dir = venv / "bin"
    stamp = venv / ".installed"
    requirements = PROJECT / "requirements.txt"
    if stamp.exists() and stamp.read_text() == requirements.read_text():
        return bin_dir
    print(f"installing oTree into {venv} (once) ...", flush=True)
    env = _isolated_env()
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, env=env)
    subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
        check=True,
        env=env,
    )
    stamp.write_text(requirements.read_text())
    return bin_dir


def _isolated_env() -> dict[str, str]:
    """This environment without PYTHONPATH: oTree's virtualenv must not see FrameLab's tree."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _libpq_url(sqlalchemy_url: str) -> str:
    """oTree's SQLAlchemy 1.3 with psycopg2 wants ``postgresql://``."""
    return sqlalchemy_url.replace("postgresql+psycopg://", "postgresql://", 1)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            out += [kid, *_children(kid)]
    return out


class OTreeServer:
    """``otree prodserver`` on a free loopback port with one session of ``n`` participants."""

    def __init__(self, bin_dir: Path, db_url: str, n: int) -> None:
        self.bin_dir, self.n = bin_dir, n
        self.db_url = _libpq_url(db_url)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.join_path = ""
        self.version = ""
        self.env = {
            **_isolated_env(),
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "DATABASE_URL": self.db_url,
            "OTREE_PRODUCTION": "1",
            "OTREE_ADMIN_PASSWORD": secrets.token_hex(8),
            "OTREE_SECRET_KEY": secrets.token_hex(16),
            "PEER_REPO": str(ROOT),
        }

    def _otree(self, *args: str) -> str:
        proc = subprocess.run(
            [str(self.bin_dir / "otree"), *args],
            cwd=PROJECT,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"otree {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
        return proc.stdout + proc.stderr

    def __enter__(self) -> OTreeServer:
        import psycopg

        self.version = subprocess.run(
            [str(self.bin_dir / "python"), "-c", "import otree; print(otree.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        self._otree("resetdb", "--noinput")
        self._otree("create_session", "product_choice", str(self.n))
        with psycopg.connect(self.db_url) as conn:
            (code,) = conn.execute("SELECT _anonymous_code FROM otree_session").fetchone()
        self.join_path = f"/join/{code}"
        self.proc = subprocess.Popen(
            [str(self.bin_dir / "otree"), "prodserver", f"127.0.0.1:{self.port}"],
            cwd=PROJECT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/favicon.ico", timeout=2)
                return self
            except httpx.HTTPError:
                time.sleep(0.3)
        self.__exit__(None, None, None)
        raise RuntimeError("otree prodserver did not start in 60 s")

    def pids(self) -> list[int]:
        """The server and every process it started (oTree's timeout worker)."""
        assert self.proc is not None
        return [self.proc.pid, *_children(self.proc.pid)]

    def __exit__(self, *exc: object) -> None:
        stop_group(self.proc)
        self.proc = None


def audit_otree(db_url: str, bots: list[Any], results: list[Any]) -> dict[str, Any]:
    """Every acknowledged answer stored exactly once with the submitted value.

    ``lost``: an acknowledged choice, premium, quiz, attention or demographics answer missing or
    stored with another value. ``duplicated``: a (participant, round) stored twice, a label
    enrolled twice, or a participant no bot created. ``incomplete``: a bot told it had finished
    whose participant oTree does not hold at the last page.
    """
    import psycopg

    problems: list[str] = []
    lost = duplicated = incomplete = 0
    with psycopg.connect(_libpq_url(db_url)) as conn:
        people = conn.execute(
            "SELECT id, label, _index_in_pages, _max_page_index FROM otree_participant "
            "WHERE _index_in_pages > 0"
        ).fetchall()
        rows = conn.execute(
            "SELECT participant_id, round_number, side, premium_usd, how_many, what_choose, "
            "price_question, instructed, age, shopping FROM product_choice_player"
        ).fetchall()
    by_label: dict[str, list[tuple]] = defaultdict(list)
    for person in people:
        by_label[person[1]].append(person)
    stored: dict[tuple[int, int], list[tuple]] = defaultdict(list)
    for row in rows:
        stored[(row[0], row[1])].append(row)
    duplicated += sum(len(v) - 1 for v in stored.values() if len(v) > 1)
    bot_ids = {b.external_id for b in bots}
    strangers = sorted(set(by_label) - bot_ids)
    duplicated += len(strangers)
    if strangers:
        problems.append(f"participants no bot created: {strangers[:5]}")
    columns = {"how_many": 4, "what_choose": 5, "price_question": 6, "instructed": 7}
    columns |= {"age": 8, "shopping": 9}
    for bot in bots:
        mine = by_label.get(bot.external_id, [])
        if len(mine) > 1:
            duplicated += len(mine) - 1
            problems.append(f"{bot.external_id}: enrolled {len(mine)} times")
        if not mine:
            if bot.acks:
                lost += len(bot.acks)
                problems.append(f"{bot.external_id}: acknowledged but not enrolled")
            continue
        pid = mine[0][0]
        for ack in bot.acks:
            row = (stored.get((pid, ack.round)) or [None])[0]
            for name, value in ack.answer.items():
                if row is None:
                    ok = False
                elif name == "side":
                    ok = row[2] == value
                elif name == "premium":
                    ok = row[3] is not None and abs(row[3] - float(value)) < 0.005
                else:
                    ok = str(row[columns[name]]) == value
                if not ok:
                    lost += 1
                    problems.append(
                        f"{bot.external_id}: {ack.page} {name} (round {ack.round}) lost"
                    )
    finished = {r.external_id for r in results if r.outcome == "completed"}
    db_completed = 0
    for label in finished:
        person = by_label.get(label, [None])[0]
        if person is not None and person[2] >= person[3]:
            db_completed += 1
        else:
            incomplete += 1
            problems.append(f"{label}: finished but not at oTree's last page")
    return {
        "ok": lost == 0 and duplicated == 0 and incomplete == 0,
        "lost": lost,
        "duplicated": duplicated,
        "incomplete": incomplete,
        "db_completed": db_completed,
        "acknowledged": sum(len(b.acks) for b in bots),
        "problems": problems[:50],
    }
