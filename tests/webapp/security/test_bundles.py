"""A study is a bundle: its files can name only files inside it, and every read is bounded.

Each attack of the security review is tried on every way a study gets in: a zip upload, a
multi-file upload, the console's "load from the studies folder" and ``framelab study load``.
Every refusal must be located (file, place, line), quick, and carry no server path and no
content of a file outside the bundle.
"""

from __future__ import annotations

import io
import os
import stat
import threading
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from webapp import bundle as bundles
from webapp.bundle import Bundle, BundleError, safe_name
from webapp.studydef import load_study_file
from webapp.validation import StudyDefinitionError

from ..conftest import DEMO, ROOT, make_app
from ..researcher.conftest import PASSWORD, login, page_token

PAIRS_NAME = "product_pairs/demo.yaml"
PAIRS = DEMO.parent / PAIRS_NAME
CANARY = "canary-7f3a9c1e-never-shown"  # content of files outside every bundle
PASSWD_LINE = "root:x:0:0"
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}]\n"
    for i in range(8)
)
# A refusal that blocks never ends (a FIFO read waits for a writer): the one thread that could
# block is given this long before the test calls it blocked. Not a speed bound.
BLOCKED_S = 60.0


def _demo_naming(name: str) -> str:
    """The demo study with its pairs file replaced by ``name``."""
    return DEMO.read_text().replace(f"pairs: {PAIRS_NAME}", f"pairs: {name}", 1)


def _sentiment_naming(name: str) -> bytes:
    """The sentiment demo with its qualification CSV replaced by ``name``."""
    text = (DEMO.parent / "sentiment-demo.yaml").read_text()
    return text.replace("items: sentiment/qualification.csv", f"items: {name}", 1).encode()


def _pairs_line() -> int:
    return next(i for i, t in enumerate(DEMO.read_text().splitlines(), 1) if "pairs: " in t)


def _zip(files: dict[str, bytes], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return buffer.getvalue()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside every bundle, holding the canary."""
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(f"{CANARY}\n", encoding="utf-8")
    return path


@pytest.fixture
def studies(tmp_path: Path, outside: Path) -> Path:
    """A studies folder (a copy of the demo) with a FIFO, symlinks pointing out and a folder."""
    folder = tmp_path / "studies"
    (folder / "product_pairs").mkdir(parents=True)
    (folder / PAIRS_NAME).write_bytes(PAIRS.read_bytes())
    (folder / "demo.yaml").write_bytes(DEMO.read_bytes())
    os.mkfifo(folder / "fifo.yaml")
    (folder / "link.yaml").symlink_to(outside)
    (folder / "linked_dir").symlink_to(outside.parent, target_is_directory=True)
    return folder


# -- names are refused by their text --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/etc/passwd", "absolute paths are not allowed"),
        ("/proc/self/environ", "absolute paths are not allowed"),
        ("../secret.txt", "'..' is not allowed"),
        ("a/../../secret.txt", "'..' is not allowed"),
        ("a\\..\\secret.txt", "not '\\'"),
        ("C:/Windows/win.ini", "drive letters"),
        ("a\x00b", "NUL"),
        ("a\nb", "control character"),
        ("x" * 500, "at most 200 characters"),
        ("/".join("d" * 12) + "/x", "folders deep"),
        (".", "is a folder"),
    ],
)
def test_names_that_could_leave_the_bundle_are_refused_by_their_text(name, reason):
    with pytest.raises(BundleError) as info:
        safe_name(name)
    assert reason in str(info.value) and len(str(info.value)) < 300, str(info.value)


def test_a_missing_file_reads_the_same_whether_or_not_it_exists_outside(studies, outside):
    # The existence oracle: names outside are refused before the file system is asked, so
    # an existing and a missing target give the same answer.
    messages = []
    for target in (outside, outside.with_name("no-such-file.txt")):
        (studies / "s.yaml").write_text(_demo_naming(str(target)))
        with pytest.raises(StudyDefinitionError) as info:
            load_study_file(studies / "s.yaml")
        messages.append(str(info.value).replace("no-such-file.txt", "secret.txt"))
    assert messages[0] == messages[1]
    for name in ("secret.txt", "no-such-file.txt"):
        (studies / "s.yaml").write_text(_demo_naming(f"../outside/{name}"))
        with pytest.raises(StudyDefinitionError) as info:
            load_study_file(studies / "s.yaml")
        messages.append(str(info.value).replace("no-such-file.txt", "secret.txt"))
    assert messages[2] == messages[3]


# -- files on disk: the YAML's own folder -------------------------------------------------


def _refused_quickly(path: Path) -> StudyDefinitionError:
    """Load ``path`` in a thread; it must be refused, not block (a FIFO waits for a writer)."""
    result: dict[str, object] = {}

    def run() -> None:
        try:
            load_study_file(path)
        except BaseException as exc:  # noqa: BLE001  # handed to the test thread
            result["exc"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BLOCKED_S)
    assert not thread.is_alive(), f"loading {path.name} blocked"
    exc = result.get("exc")
    assert isinstance(exc, StudyDefinitionError), repr(exc)
    return exc


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("/etc/passwd", "absolute paths are not allowed"),
        ("/proc/self/environ", "absolute paths are not allowed"),
        ("/dev/zero", "absolute paths are not allowed"),
        ("../outside/secret.txt", "'..' is not allowed"),
        ("link.yaml", "is a symbolic link"),
        ("linked_dir/secret.txt", "is a symbolic link"),
        ("fifo.yaml", "not a regular file"),
        ("product_pairs", "is a folder"),
        ("nowhere.yaml", "file not found in the study bundle"),
    ],
)
def test_a_study_on_disk_names_only_regular_files_of_its_own_folder(
    studies, tmp_path, name, reason
):
    (studies / "s.yaml").write_text(_demo_naming(name))
    exc = _refused_quickly(studies / "s.yaml")
    message = str(exc)
    assert message.startswith("s.yaml: tasks[3].pairs: ") and reason in exc.reason, message
    assert exc.line == _pairs_line(), message
    assert str(tmp_path) not in message and CANARY not in message and PASSWD_LINE not in message


def test_a_fifo_as_the_study_file_itself_is_refused_without_blocking(studies):
    # The console offers every *.yaml of the studies folder; a FIFO among them must not hang.
    exc = _refused_quickly(studies / "fifo.yaml")
    assert (
        str(exc)
        == "fifo.yaml: (top level): 'fifo.yaml' is not a regular file (a device or a pipe) (line 1)"
    )


def test_a_device_inside_the_folder_is_refused_before_it_is_read(studies):
    # /dev/null is a character device; a symlink to it is refused as a link, so bind the
    # check itself: a bundle opened on /dev refuses its devices without reading them.
    bundle = Bundle("zero", {}, folder=Path("/dev"))
    with pytest.raises(BundleError, match="not a regular file"):
        bundle.read("zero")


def test_a_file_over_the_size_limit_is_refused_without_reading_it_all(studies):
    with (studies / "big.yaml").open("wb") as fh:  # sparse: no disk used
        fh.truncate(bundles.MAX_FILE_BYTES * 4)
    (studies / "s.yaml").write_text(_demo_naming("big.yaml"))
    tracemalloc.start()
    try:
        exc = _refused_quickly(studies / "s.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "larger than 1 MiB" in exc.reason, str(exc)  # a YAML file's limit
    assert peak < 4 * bundles.MAX_YAML_BYTES, peak


def test_the_console_load_action_has_the_same_containment(tmp_path, studies):
    (studies / "s.yaml").write_text(_demo_naming("link.yaml"))
    app = make_app(f"sqlite:///{tmp_path / 'db.sqlite'}", STUDIES_DIR=str(studies))
    client = _researcher(app, "nina")
    resp = client.post(
        "/researcher/studies/load",
        data={"csrf_token": page_token(client, "/researcher/"), "name": "s.yaml"},
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 422 and "s.yaml: tasks[3].pairs: " in html
    assert "is a symbolic link" in html and CANARY not in html and str(tmp_path) not in html


def test_the_cli_study_load_has_the_same_containment(tmp_path, studies):
    (studies / "s.yaml").write_text(_demo_naming("/proc/self/environ"))
    app = make_app(f"sqlite:///{tmp_path / 'db.sqlite'}")
    result = app.test_cli_runner().invoke(args=["study", "load", str(studies / "s.yaml")])
    assert result.exit_code == 1
    assert "s.yaml: tasks[3].pairs: '/proc/self/environ' is not a file of the study bundle" in (
        result.output
    )
    assert "PATH=" not in result.output


# -- YAML: one hardened loader ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason", "line"),
    [
        (ALIAS_BOMB, "anchors and aliases", 1),
        ("slug: x\ntitle: &t T\ndescription: *t\n", "anchors and aliases", 2),
        ("slug: x\nrecruitment:\n  <<: {platforms: [link]}\n", "merge keys (<<)", 3),
        ("slug: " + "[" * 200 + "]" * 200 + "\n", "nested more than", 1),
        ("slug: x\nestimated_minutes: 2001-02-30\n", "day is out of range", 2),
        ("slug: x\nestimated_minutes: " + "1" * 5_000 + "\n", "digits", 2),
        # Found by the outside walkthrough: PyYAML kept the second key silently.
        ("slug: x\npayment:\n  base_usd: 3\n  base_usd: 4\n", "'base_usd' appears twice", 4),
        ("slug: x\nrecruitment: {platforms: [link], platforms: [mturk]}\n", "appears twice", 2),
    ],
)
def test_the_loader_refuses_aliases_merge_keys_deep_nesting_and_odd_scalars(
    tmp_path, text, reason, line
):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(path)
    assert reason in info.value.reason and info.value.line == line, str(info.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_number_json_cannot_hold_is_refused_at_its_line(tmp_path, value):
    # Found by the generated uploads below: NaN passed "at least 0" and PostgreSQL's JSON
    # column refused it at commit time (a 500).
    (tmp_path / "product_pairs").mkdir()
    (tmp_path / PAIRS_NAME).write_bytes(PAIRS.read_bytes())
    text = DEMO.read_text().replace("estimated_minutes: 12", f"estimated_minutes: {value}", 1)
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(StudyDefinitionError) as info:
        load_study_file(tmp_path / "s.yaml")
    assert info.value.path == "estimated_minutes" and "finite" in info.value.reason
    assert info.value.line == next(
        i for i, t in enumerate(text.splitlines(), 1) if "estimated_minutes" in t
    )


@pytest.mark.postgres
def test_a_nan_upload_is_refused_not_a_500_on_postgres(pg_app):
    client = _researcher(pg_app, "nan")
    text = DEMO.read_text().replace("estimated_minutes: 12", "estimated_minutes: .nan", 1)
    resp = client.post(
        "/researcher/studies/upload",
        data={
            "csrf_token": page_token(client, "/researcher/"),
            "file": (
                io.BytesIO(_zip({"s.yaml": text.encode(), PAIRS_NAME: PAIRS.read_bytes()})),
                "s.zip",
            ),
        },
        content_type="multipart/form-data",
    )
    html = resp.get_data(as_text=True)
    assert resp.status_code == 422 and "s.yaml: estimated_minutes: " in html, html[:500]


# -- zips ---------------------------------------------------------------------------------------


def _demo_zip(**extra: bytes) -> dict[str, bytes]:
    return {"demo.yaml": DEMO.read_bytes(), PAIRS_NAME: PAIRS.read_bytes(), **extra}


def test_a_zip_with_the_study_and_its_pairs_file_side_by_side_loads():
    """docs/console.md's layout: the study YAML and the stimulus files next to it, a pairs
    YAML among them."""
    from webapp.studydef import load_bundle

    study = DEMO.read_text().replace(f"pairs: {PAIRS_NAME}", "pairs: pairs.yaml")
    files = {"pairs.yaml": PAIRS.read_bytes(), "study.yaml": study.encode()}
    for wrapped in (files, {f"mystudy/{n}": b for n, b in files.items()}):
        bundle = Bundle.from_zip(_zip(wrapped))
        assert bundle.study_name == "study.yaml"
        assert len(load_bundle(bundle).tasks[3].params["pairs"]) == 10


@pytest.mark.parametrize(
    ("files", "symlinks", "reason"),
    [
        ({**_demo_zip(), "../evil.csv": b"x"}, None, "'..' is not allowed"),
        ({**_demo_zip(), "/etc/cron.d/x": b"x"}, None, "absolute paths"),
        (_demo_zip(), {"product_pairs/link.yaml": "/etc/passwd"}, "is a symbolic link"),
        ({**_demo_zip(), "other.yaml": b"slug: x\ntasks: []\n"}, None, "several study files"),
        ({"a.yaml": b"pairs: []\n", "b.yaml": b"x: 1\n"}, None, "a top-level 'tasks:' key"),
        ({PAIRS_NAME: PAIRS.read_bytes(), "sentiment/a.csv": b""}, None, "has no YAML file there"),
        ({f"f{i}.csv": b"" for i in range(bundles.MAX_FILES + 1)}, None, "at most 200 files"),
    ],
)
def test_a_zip_with_unsafe_entries_is_refused(files, symlinks, reason):
    with pytest.raises(BundleError, match=None) as info:
        Bundle.from_zip(_zip(files, symlinks=symlinks))
    assert reason in str(info.value), str(info.value)


def test_a_zip_bomb_is_refused_counting_the_bytes_actually_decompressed():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("demo.yaml", DEMO.read_bytes())
        with archive.open("bomb.csv", "w", force_zip64=True) as fh:
            chunk = b"\0" * (1 << 20)
            for _ in range(128):  # 128 MiB of zeros, about 128 KiB compressed
                fh.write(chunk)
    data = buffer.getvalue()
    assert len(data) < 2 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(BundleError, match="larger than 8 MiB"):
            Bundle.from_zip(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * bundles.MAX_FILE_BYTES, peak


def test_a_zip_whose_header_understates_an_entry_is_still_bounded():
    files = _demo_zip(**{"big.csv": b"a" * (bundles.MAX_FILE_BYTES + 10)})
    data = bytearray(_zip(files))
    # Rewrite the claimed uncompressed size of big.csv in its central directory entry.
    at = data.rfind(b"big.csv") - 46
    assert data[at : at + 4] == b"PK\x01\x02"
    data[at + 24 : at + 28] = (100).to_bytes(4, "little")
    with pytest.raises(BundleError) as info:
        Bundle.from_zip(bytes(data))
    assert "larger than" in str(info.value) or "cannot be decompressed" in str(info.value)


def test_a_name_missing_from_an_upload_lists_what_the_bundle_holds():
    # Browsers send bare file names for a multi-file pick: say what arrived.
    from webapp.studydef import load_bundle

    files = [("study.yaml", DEMO.read_bytes()), ("demo.yaml", PAIRS.read_bytes())]
    with pytest.raises(StudyDefinitionError) as info:
        load_bundle(Bundle.from_files(files, study_name="study.yaml"))
    # ... and what to do (found by the outside walkthrough: the demo's YAML and its pairs file
    # picked together were refused without a way out).
    assert info.value.reason == (
        "file not found in the study bundle: 'product_pairs/demo.yaml' (it holds 'demo.yaml'); "
        "files picked together arrive without their folders: write 'demo.yaml' in the YAML, "
        "or upload a zip of the study's folder"
    )
    assert info.value.line == _pairs_line()


def test_a_zipped_folder_is_one_bundle():
    bundle = Bundle.from_zip(_zip({f"mystudy/{n}": b for n, b in _demo_zip().items()}))
    assert bundle.study_name == "demo.yaml" and bundle.read(PAIRS_NAME) == PAIRS.read_bytes()


# -- the console, end to end over HTTP --------------------------------------------------------


def _researcher(app, username: str):
    from webapp.services.researchers import set_researcher

    with app.app_context():
        set_researcher(username, PASSWORD, is_admin=False)
    client = app.test_client()
    assert login(client, username).status_code == 302
    return client


def _post_upload(session, base: str, files: list[tuple[str, tuple[str, bytes]]]):
    html = session.get(f"{base}/researcher/").text
    token = html.split('name="csrf_token" type="hidden" value="', 1)[1].split('"', 1)[0]
    return session.post(
        f"{base}/researcher/studies/upload",
        data={"csrf_token": token},
        files=files,
        allow_redirects=False,
        timeout=30,
    )


def test_a_researcher_uploads_bundles_and_attacks_are_refused_over_http(
    tmp_path, serve_app, studies, outside
):
    import requests

    app = make_app(f"sqlite:///{tmp_path / 'db.sqlite'}", STUDIES_DIR=str(studies))
    with app.app_context():
        from webapp.services.researchers import set_researcher

        set_researcher("rita", PASSWORD, is_admin=False)
    base = serve_app(app)
    http = requests.Session()
    token = (
        http.get(f"{base}/researcher/login")
        .text.split('name="csrf_token" type="hidden" value="', 1)[1]
        .split('"', 1)[0]
    )
    resp = http.post(
        f"{base}/researcher/login",
        data={"csrf_token": token, "username": "rita", "password": PASSWORD},
        allow_redirects=False,
    )
    assert resp.status_code == 302

    # A zip bundle and a multi-file bundle both create a study.
    resp = _post_upload(http, base, [("file", ("study.zip", _zip(_demo_zip())))])
    assert resp.status_code == 302, resp.text[:2000]
    page = http.get(f"{base}/researcher/studies/product-choice-demo")
    assert page.status_code == 200 and "data-bundle" in page.text
    stored = http.get(f"{base}/researcher/studies/product-choice-demo/bundle.zip")
    assert zipfile.ZipFile(io.BytesIO(stored.content)).namelist() == ["demo.yaml", PAIRS_NAME]
    other = DEMO.read_text().replace("slug: product-choice-demo", "slug: multi-file-demo", 1)
    other = other.replace(f"pairs: {PAIRS_NAME}", "pairs: demo-pairs.yaml", 1)
    resp = _post_upload(
        http,
        base,
        [
            ("file", ("multi.yaml", other.encode())),
            ("stimuli", ("demo-pairs.yaml", PAIRS.read_bytes())),
        ],
    )
    assert resp.status_code == 302, resp.text[:2000]
    assert "multi-file-demo" in http.get(f"{base}/researcher/").text

    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("demo.yaml", DEMO.read_bytes())
        archive.writestr("bomb.csv", b"\0" * (64 * 1024 * 1024))
    attacks = {
        "absolute": ([("file", ("a.yaml", _demo_naming(str(outside)).encode()))], "absolute"),
        "dotdot": ([("file", ("a.yaml", _demo_naming("../outside/secret.txt").encode()))], ".."),
        "environ": ([("file", ("a.yaml", _demo_naming("/proc/self/environ").encode()))], "abs"),
        "zero": ([("file", ("a.yaml", _demo_naming("/dev/zero").encode()))], "absolute"),
        "fifo": ([("file", ("a.yaml", _demo_naming("fifo.yaml").encode()))], "not found"),
        "symlink": (
            [("file", ("s.zip", _zip(_demo_zip(), symlinks={"x.yaml": str(outside)})))],
            "symbolic link",
        ),
        "alias bomb": ([("file", ("a.yaml", ALIAS_BOMB.encode()))], "anchors and aliases"),
        # The item CSV's "missing column" error used to echo the header: the first line.
        "passwd csv": ([("file", ("s.yaml", _sentiment_naming("/etc/passwd")))], "absolute"),
        "environ csv": ([("file", ("s.yaml", _sentiment_naming("/proc/self/environ")))], "abs"),
        "zip bomb": ([("file", ("b.zip", bomb.getvalue()))], "larger than 8 MiB"),
        "long name": ([("file", ("n" * 500 + ".yaml", DEMO.read_bytes()))], "200 characters"),
    }
    for what, (files, reason) in attacks.items():
        resp = _post_upload(http, base, files)
        html = resp.text
        assert resp.status_code == 422, (what, resp.status_code, html[:500])
        errors = [e for e in html.split("data-upload-error>")[1:]]
        assert errors and reason in errors[0].replace("&#39;", "'"), (what, errors[:1])
        assert CANARY not in html and PASSWD_LINE not in html and str(tmp_path) not in html
        assert str(ROOT) not in html and "PATH=" not in html, what
    # The folder action: the same containment for files on the server.
    for name, reason in (("fifo.yaml", "not a regular file"), ("link.yaml", "symbolic link")):
        (studies / "evil.yaml").write_text(_demo_naming(name))
        html = http.get(f"{base}/researcher/").text
        token = html.split('name="csrf_token" type="hidden" value="', 1)[1].split('"', 1)[0]
        resp = http.post(
            f"{base}/researcher/studies/load",
            data={"csrf_token": token, "name": "evil.yaml"},
            timeout=BLOCKED_S,
        )
        assert resp.status_code == 422 and reason in resp.text, resp.text[:500]
        assert CANARY not in resp.text and str(tmp_path) not in resp.text


# -- generated bundles on PostgreSQL ----------------------------------------------------------

EVIL_NAMES = st.sampled_from(
    [
        "../secret.txt",
        "/etc/passwd",
        "/proc/self/environ",
        "/dev/zero",
        "a/../../secret.txt",
        "..\\secret.txt",
        "C:/x.yaml",
        "x\x00y.csv",
        "",
        ".",
        "n" * 500,
        PAIRS_NAME,
        "demo-pairs.yaml",
    ]
)
NAMES = st.one_of(EVIL_NAMES, st.text(max_size=40), st.text(max_size=5).map(lambda t: f"{t}.yaml"))
ODD_SCALARS = st.sampled_from(
    [
        "2001-02-30",
        "1" * 5_000,
        "x" * 20_000,
        "\x00",
        "~",
        ".nan",
        "!!binary aGVsbG8=",
        "!!python/object:os.system ls",
        "[" * 300,
        "{a: " * 100,
        "*undefined",
        "<<: {a: 1}",
    ]
)


def _nested(inner: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    )


VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=50)),
    _nested,
    max_leaves=10,
)


@st.composite
def study_texts(draw) -> str:
    """A study YAML: the demo naming a generated file, a mutated demo, or arbitrary YAML."""
    kind = draw(st.sampled_from(["demo", "demo", "scalar", "random", "alias", "raw"]))
    if kind == "demo":
        return _demo_naming(draw(NAMES).replace("\n", " "))
    if kind == "scalar":
        return DEMO.read_text().replace(
            "estimated_minutes: 12", f"estimated_minutes: {draw(ODD_SCALARS)}", 1
        )
    if kind == "random":
        return yaml.safe_dump(draw(VALUES), allow_unicode=True)
    if kind == "alias":
        depth = draw(st.integers(1, 12))
        return ALIAS_BOMB.split("\n")[0] + "\n" + "\n".join(ALIAS_BOMB.split("\n")[1:depth])
    return draw(st.text(max_size=300))


SAFE_NAMES = st.from_regex(r"[a-z]{1,8}(/[a-z_]{1,8}){0,2}\.(yaml|yml)", fullmatch=True)


@st.composite
def uploads(draw) -> list[tuple[str, tuple[str, bytes]]]:
    """A console upload: a zip, or the study YAML with stimulus files; often nearly valid."""
    pairs_name = draw(st.one_of(st.just(PAIRS_NAME), SAFE_NAMES, NAMES))
    valid = _demo_naming(pairs_name.replace("\n", " "))
    study = draw(st.one_of(st.just(valid), st.just(valid), study_texts()))
    study_bytes = study.encode("utf-8", errors="surrogatepass")
    # sampled_from, not integers or booleans: those lean towards 0 and False.
    extra = {pairs_name: PAIRS.read_bytes()} if draw(st.sampled_from([1, 1, 1, 0])) else {}
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        extra[draw(NAMES)] = draw(st.sampled_from([PAIRS.read_bytes(), b"", b"\xff\xfe", b"\0"]))
    study_name = draw(st.one_of(st.just("study.yaml"), SAFE_NAMES, NAMES))
    if draw(st.sampled_from(["zip", "files"])) == "zip":
        files = {study_name.strip("/") or "x.yaml": study_bytes, **extra}
        return [("file", ("bundle.zip", _zip_lenient(files)))]
    return [("file", (study_name, study_bytes))] + [("stimuli", (n, b)) for n, b in extra.items()]


def _zip_lenient(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(zipfile.ZipInfo(name.replace("\x00", "") or "x"), content)
    return buffer.getvalue()


@pytest.mark.postgres
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(upload=uploads())
@example(upload=[("file", ("study.yaml", b"slug: x\n")), ("stimuli", ("\n", b"\0"))])
def test_generated_bundles_never_500_stay_bounded_and_never_show_foreign_content(pg_app, upload):
    client = _pg_client(pg_app)
    token = page_token(client, "/researcher/")
    data: dict[str, object] = {"csrf_token": token}
    for field, (name, content) in upload:
        entry = (io.BytesIO(content), name)
        data.setdefault(field, []).append(entry)  # type: ignore[union-attr]
    tracemalloc.start()
    try:
        resp = client.post(
            "/researcher/studies/upload", data=data, content_type="multipart/form-data"
        )
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    html = resp.get_data(as_text=True)
    # A line break in a file's name breaks its part's header (browsers escape it; the test
    # client does not), so the part arrives as a form field: with a NUL in it, the request
    # guard's friendly 400 is the right answer (webapp/request_guard.py).
    guarded = resp.status_code == 400 and "E400-CHARACTERS" in html
    assert resp.status_code in (302, 413, 422) or guarded, (resp.status_code, html[:1000])
    event(f"HTTP {resp.status_code}")
    # An alias bomb or an unbounded read shows in the memory it takes.
    assert peak < 8 * bundles.MAX_BUNDLE_BYTES, peak
    assert PASSWD_LINE not in html and "PATH=" not in html and "test-secret" not in html
    assert str(ROOT) not in html and "Traceback" not in html


_PG_CLIENTS: dict[int, object] = {}


def _pg_client(app):
    """One logged-in non-admin client per app (hypothesis runs many examples on one app)."""
    if id(app) not in _PG_CLIENTS:
        _PG_CLIENTS.clear()
        _PG_CLIENTS[id(app)] = _researcher(app, "gen")
    return _PG_CLIENTS[id(app)]
