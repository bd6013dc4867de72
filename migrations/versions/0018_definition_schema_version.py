"""Stored study definitions carry a schema version and every key.

Version 1 left a key out when the study file did not give it, so that definitions stored before
the key existed kept their hash: ``language``, ``recruitment.completion_codes.study_full``,
``recruitment.target_n``, ``recruitment.time_limit_minutes``, ``recruitment.verified_entry``,
``payment.bonus.max``, ``authenticity``, ``recruiter`` and ``analysis``. Version 2
(``"schema_version": 2``) writes each of them, with its default or ``null``, which is the form
``webapp.definition.StudyDefinition.to_json`` stores; so loading an unchanged study file after
this migration finds it unchanged. ``definition_hash`` follows the definition. The downgrade
drops the version and the keys that hold their defaults (a file that spelled out a default,
e.g. ``language: en``, is then found changed once when loaded again).

Written by hand.

Revision ID: 0018_definition_schema_version
Revises: 0017_authenticity_signals
Create Date: 2026-12-02 09:00:00

"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0018_definition_schema_version"
down_revision = "0017_authenticity_signals"
branch_labels = None
depends_on = None

_study = sa.table(
    "study",
    sa.column("id", sa.Integer),
    sa.column("definition", sa.JSON),
    sa.column("definition_hash", sa.String),
)

VERSION = 2
# (path of the mapping, key, the value version 2 writes when the file leaves the key out)
_DEFAULTS = [
    ((), "language", "en"),
    (("recruitment", "completion_codes"), "study_full", None),
    (("recruitment",), "target_n", None),
    (("recruitment",), "time_limit_minutes", None),
    (("recruitment",), "verified_entry", False),
    (("payment", "bonus"), "max", None),
    ((), "authenticity", {"canary": False, "reading_wpm": 1000.0}),
    ((), "recruiter", None),
    ((), "analysis", None),
]


def convert(definition, up):
    """``definition`` in version 2 (``up``) or version 1."""
    d = json.loads(json.dumps(definition))
    for path, key, default in _DEFAULTS:
        mapping = d
        for part in path:
            mapping = mapping[part]
        if up:
            mapping.setdefault(key, default)
        elif key in mapping and mapping[key] == default:
            del mapping[key]
    if up:
        d["schema_version"] = VERSION
    else:
        del d["schema_version"]
    return d


def _hash(definition):
    # webapp.models.definition_hash, written out: a migration keeps what it ran with.
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _migrate(up):
    conn = op.get_bind()
    for row in conn.execute(sa.select(_study.c.id, _study.c.definition)).all():
        definition = row.definition
        if isinstance(definition, str):  # a JSON column some drivers hand back as text
            definition = json.loads(definition)
        if not isinstance(definition, dict) or "payment" not in definition:
            continue
        if (definition.get("schema_version") == VERSION) == up:
            continue  # already in the form asked for
        new = convert(definition, up)
        conn.execute(
            _study.update()
            .where(_study.c.id == row.id)
            .values(definition=new, definition_hash=_hash(new))
        )


def upgrade():
    _migrate(up=True)


def downgrade():
    _migrate(up=False)
