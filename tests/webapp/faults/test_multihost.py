"""Three app servers on one PostgreSQL database behind a round-robin proxy: every participant's
pages are spread over the servers, and nothing is lost, duplicated or refused."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ..conftest import ROOT


@pytest.mark.postgres
@pytest.mark.slow
def test_40_participants_over_3_servers_pass_the_audit(pg_url):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "multihost.py"),
            "--servers",
            "3",
            "--n",
            "40",
            "--ramp-s",
            "5",
            "--pg-url",
            pg_url,
        ],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "outcomes: {'completed': 40}" in out and "audit: ok; lost 0, duplicated 0" in out
    served = [int(n) for n in re.findall(r"'127\.0\.0\.1:\d+': (\d+)", out)]
    assert len(served) == 3 and "'failed'" not in out
    # Round robin: each server took a third of the requests, give or take one.
    assert max(served) - min(served) <= 1, served
