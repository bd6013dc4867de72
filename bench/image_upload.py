"""Time the upload of a study bundle with product images: its validation and the console upload.

Writes a bundle into a temporary folder: the product-choice demo with 20 pairs (the demo's 10
twice, under other pair IDs) whose 40 products show 20 product photos (1200 x 900 JPEG and
800 x 600 PNG, smooth with noise, 150-600 KB), each photo shown by two products, as a study
that reuses a manufacturer's photo does. Then, in the same run and alternating, it validates the
bundle (``load_bundle``) and uploads it as a zip through the console (``POST
/researcher/studies/upload``, SQLite in the temporary folder) (a) as the web app does and (b)
with every image decoded at each product that shows it, the way uploads worked before an image
was checked once per bundle. Prints the median of each and the ratio.

    python bench/image_upload.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import io
import logging
import shutil
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import yaml
from PIL import Image, ImageFile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.webapp.conftest import DEMO, make_app  # noqa: E402
from tests.webapp.researcher.conftest import PASSWORD, csrf_from, login  # noqa: E402
from webapp.bundle import Bundle  # noqa: E402
from webapp.studydef import load_bundle  # noqa: E402

N_IMAGES = 20


def _photo(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([x * 255 // width, y * 255 // height, (x + y) * 255 // (width + height)], -1)
    return np.clip(base + rng.normal(0, 3, (height, width, 3)), 0, 255).astype("uint8")


def write_bundle(folder: Path) -> bytes:
    """Write the study folder; return it as a zip."""
    shutil.copytree(DEMO.parent / "product_pairs", folder / "product_pairs")
    shutil.copy(DEMO, folder / "study.yaml")
    pairs_path = folder / "product_pairs" / "demo.yaml"
    data = yaml.safe_load(pairs_path.read_text(encoding="utf-8"))
    twice = [{**copy.deepcopy(p), "id": f"{p['id']}-b"} for p in data["pairs"]]
    data["pairs"] = data["pairs"] + twice
    rng = np.random.default_rng(0)
    names = []
    for i in range(N_IMAGES):
        name = f"images/photo-{i:02d}." + ("jpg" if i % 2 else "png")
        path = folder / "product_pairs" / name
        if i % 2:
            Image.fromarray(_photo(rng, 1200, 900)).save(path, "JPEG", quality=88)
        else:
            Image.fromarray(_photo(rng, 800, 600)).save(path, "PNG")
        names.append(name)
    products = [pair[side] for pair in data["pairs"] for side in ("target", "control")]
    for i, product in enumerate(products):
        product["image"] = names[i % N_IMAGES]
        product["image_alt"] = f"Product photo {i % N_IMAGES}"
    pairs_path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    sizes = [(folder / "product_pairs" / n).stat().st_size // 1024 for n in names]
    print(
        f"bundle: {len(data['pairs'])} pairs, {len(products)} products, {N_IMAGES} images "
        f"({min(sizes)}-{max(sizes)} KB), zip {len(buffer.getvalue()) / 2**20:.1f} MiB"
    )
    return buffer.getvalue()


def _each_time() -> Any:
    """Bundle.once computing every time: each image checked at each product showing it."""
    return mock.patch.object(Bundle, "once", lambda bundle, key, compute: compute())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    decoded = [0]
    load = ImageFile.ImageFile.load

    def counting(image: Any) -> Any:
        decoded[0] += 1
        return load(image)

    mock.patch.object(ImageFile.ImageFile, "load", counting).start()
    logging.disable(logging.INFO)  # the migrations' progress (alembic sets its own levels)
    with tempfile.TemporaryDirectory() as tmp:
        zipped = write_bundle(Path(tmp) / "study")
        app = make_app(f"sqlite:///{Path(tmp) / 'bench.sqlite'}")
        from webapp.services.researchers import set_researcher

        with app.app_context():
            set_researcher("bench", PASSWORD, is_admin=True)
        client = app.test_client()
        assert login(client, "bench").status_code == 302
        files = list(Bundle.from_zip(zipped).files())

        def validate() -> None:
            load_bundle(
                Bundle.from_files([(f.name, f.content) for f in files], study_name="study.yaml")
            )

        uploads = iter(range(10**6))

        def upload() -> None:
            token = csrf_from(client.get("/researcher/").get_data(as_text=True))
            form = {
                "csrf_token": token,
                "file": (io.BytesIO(zipped), "study.zip"),
                "slug": f"bench-{next(uploads)}",
            }
            response = client.post(
                "/researcher/studies/upload", data=form, content_type="multipart/form-data"
            )
            assert response.status_code == 302, response.get_data(as_text=True)[-2000:]

        for label, step in (("validate (load_bundle)", validate), ("console upload", upload)):
            times: dict[str, list[float]] = {"once": [], "each": []}
            counts: dict[str, int] = {}
            for _ in range(args.repeats):
                for mode in ("each", "once"):
                    decoded[0] = 0
                    start = time.perf_counter()
                    if mode == "each":
                        with _each_time():
                            step()
                    else:
                        step()
                    times[mode].append(time.perf_counter() - start)
                    counts[mode] = decoded[0]
            each, once = statistics.median(times["each"]), statistics.median(times["once"])
            print(
                f"{label}: each product {each:.3f} s ({counts['each']} decodes), once per "
                f"image {once:.3f} s ({counts['once']} decodes): {each / once:.2f}x"
            )


if __name__ == "__main__":
    main()
