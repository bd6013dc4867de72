"""Prolific's demographic export, joined to the platform's export by participant.

Prolific's "Download demographic data" CSV has one row per submission with columns such as
``Submission id, Participant id, Status, Started at, Completed at, Time taken, Age, Sex,
Ethnicity simplified, Country of residence, Nationality, Language, Student status, Employment
status`` (more or fewer depending on the study's screeners). Two quirks: a participant who
revoked consent has ``CONSENT_REVOKED`` in every demographic cell, and data older than Prolific's
retention period reads ``DATA_EXPIRED``; both are read as missing and counted.

The platform's export identifies people by a pseudonym (``p_`` + HMAC, ``docs/export.md``);
the Prolific ID appears only with ``framelab export --include-platform-ids`` (column
``platform_participant_id``). The join uses that column when the export has it; otherwise the
researcher gives a two-column map ``participant_id, platform_participant_id`` (e.g. cut from an
export made with ``--include-platform-ids``) so that the analysis file itself can stay
pseudonymous.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from analysis.io import ExportFormatError, check_columns, read_table

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "PROLIFIC_COLUMNS",
    "describe_demographics",
    "join_demographics",
    "load_id_map",
    "load_prolific_demographics",
]

# Prolific's column -> ours. Only ``Participant id`` is required; the rest are read when present.
PROLIFIC_COLUMNS = {
    "Participant id": "platform_participant_id",
    "Submission id": "submission_id",
    "Status": "prolific_status",
    "Started at": "started_at",
    "Completed at": "completed_at",
    "Time taken": "time_taken_s",
    "Age": "age",
    "Sex": "sex",
    "Ethnicity simplified": "ethnicity",
    "Country of residence": "country",
    "Nationality": "nationality",
    "Language": "language",
    "Student status": "student_status",
    "Employment status": "employment_status",
}
MISSING_MARKERS = {"CONSENT_REVOKED": "consent_revoked", "DATA_EXPIRED": "data_expired"}
# Statuses of a submission Prolific counts as done; preferred when a participant has several rows.
_DONE = ("APPROVED", "AWAITING REVIEW")


def load_prolific_demographics(path: str | Path) -> pd.DataFrame:
    """Read Prolific's demographic export: one row per participant, quirks made explicit.

    Parameters
    ----------
    path : str or Path
        The CSV from Prolific ("Download demographic data"); column names as Prolific writes
        them (matched ignoring case and surrounding spaces).

    Returns
    -------
    pandas.DataFrame
        ``platform_participant_id`` plus whichever of ``prolific_status, age, sex, ethnicity,
        country, nationality, language, student_status, employment_status, time_taken_s, ...``
        the file has; ``age`` and ``time_taken_s`` as floats; ``CONSENT_REVOKED`` /
        ``DATA_EXPIRED`` cells and Prolific's placeholder ``Prefer not to say`` kept as
        written except the two markers, which become missing; ``demographics_status`` is
        ``ok``, ``consent_revoked`` or ``data_expired``. A participant with several
        submissions (returned, then completed) keeps the approved or awaiting-review one,
        else the last.

    Raises
    ------
    ExportFormatError
        No ``Participant id`` column, or an ``Age`` that is neither a number nor a marker.
    """
    import numpy as np
    import pandas as pd

    raw = read_table(path)
    source = f"{Path(path).name} (Prolific demographic export)"
    by_lower = {str(c).strip().lower(): c for c in raw.columns}
    rename = {by_lower[k.lower()]: v for k, v in PROLIFIC_COLUMNS.items() if k.lower() in by_lower}
    df = raw.rename(columns=rename)
    check_columns(df, ["platform_participant_id"], source, known=PROLIFIC_COLUMNS.values())
    df = df[list(dict.fromkeys(rename.values()))]
    # A row without a participant ID (a blank line at the end of a hand-edited file) joins nothing.
    df = df[df["platform_participant_id"].notna()].copy()
    df["platform_participant_id"] = df["platform_participant_id"].astype(str).str.strip()
    marker = pd.Series("ok", index=df.index, dtype=object)
    for col in df.columns:
        if col == "platform_participant_id":
            continue
        cells = df[col].astype(str).str.strip()
        for text, status in MISSING_MARKERS.items():
            hit = cells == text
            marker[hit & (marker == "ok")] = status
            df.loc[hit, col] = None
    df["demographics_status"] = marker
    for col in ("age", "time_taken_s"):
        if col in df.columns:
            num = pd.to_numeric(df[col], errors="coerce")
            bad = df[col].notna() & num.isna()
            if bad.any():
                examples = ", ".join(repr(v) for v in df.loc[bad, col].unique()[:3])
                raise ExportFormatError(f"{source}: {col!r} is not numeric ({examples})")
            df[col] = num.astype(float)
    if "prolific_status" in df.columns:
        done = df["prolific_status"].fillna("").str.strip().str.upper().isin(_DONE)
        df["_rank"] = np.where(done, 1, 0)
        df = df.reset_index(drop=True).reset_index(names="_order")
        df = df.sort_values(["platform_participant_id", "_rank", "_order"])
        df = df.drop(columns=["_rank", "_order"])
    df = df.drop_duplicates("platform_participant_id", keep="last")
    return df.reset_index(drop=True)


def load_id_map(path: str | Path) -> pd.DataFrame:
    """Read a researcher's map from the export's pseudonym to the Prolific ID.

    Parameters
    ----------
    path : str or Path
        CSV/Parquet with ``participant_id`` (the export's pseudonym) and
        ``platform_participant_id`` (the Prolific ``Participant id``).

    Returns
    -------
    pandas.DataFrame
        The two columns as trimmed strings, one row per pseudonym.

    Raises
    ------
    ExportFormatError
        A missing column, or one pseudonym mapped to two Prolific IDs.
    """
    df = read_table(path)
    source = f"{Path(path).name} (participant ID map)"
    cols = ["participant_id", "platform_participant_id"]
    check_columns(df, cols, source)
    df = df[cols].dropna().astype(str).apply(lambda s: s.str.strip()).drop_duplicates()
    dup = df["participant_id"].duplicated(keep=False)
    if dup.any():
        raise ExportFormatError(
            f"{source}: {df.loc[dup, 'participant_id'].nunique()} pseudonym(s) map to more "
            f"than one platform ID, e.g. {df.loc[dup, 'participant_id'].iloc[0]!r}"
        )
    return df


def join_demographics(
    data: pd.DataFrame,
    demographics: pd.DataFrame,
    *,
    id_map: pd.DataFrame | None = None,
    subject: str = "participant_id",
) -> tuple[pd.DataFrame, dict[str, object]]:
    """Add each participant's demographics to every one of their rows.

    Parameters
    ----------
    data : pandas.DataFrame
        Trial-level data with ``subject`` and, unless ``id_map`` is given,
        ``platform_participant_id`` (``framelab export --include-platform-ids``).
    demographics : pandas.DataFrame
        Output of :func:`load_prolific_demographics`.
    id_map : pandas.DataFrame, optional
        Output of :func:`load_id_map`; used when ``data`` carries only pseudonyms.
    subject : str
        Participant column of ``data``.

    Returns
    -------
    (pandas.DataFrame, dict)
        ``data`` with the demographic columns added (left join: rows are never dropped;
        ``demographics_status`` is ``not in the demographic export`` for unmatched
        participants), and a summary: ``key`` (how the join was made), ``n_participants``,
        ``n_matched``, ``n_unmatched``, ``n_consent_revoked``, ``n_data_expired``,
        ``n_demographic_rows_unused`` (Prolific rows with no participant in the data).

    Raises
    ------
    ExportFormatError
        Neither a ``platform_participant_id`` column nor an ``id_map``.
    """
    out = data.copy()
    dropped = [c for c in demographics.columns if c != "platform_participant_id" and c in out]
    if id_map is not None:
        if "platform_participant_id" in out.columns:
            out = out.drop(columns="platform_participant_id")
        out = out.merge(id_map.rename(columns={"participant_id": subject}), on=subject, how="left")
        key = "participant ID map (pseudonym -> Prolific Participant id)"
    elif "platform_participant_id" in out.columns:
        key = "platform_participant_id column of the export (--include-platform-ids)"
    else:
        raise ExportFormatError(
            "the data carry only pseudonyms (no platform_participant_id column): export with "
            "`framelab export SLUG --include-platform-ids`, or give a participant ID map "
            "(--id-map FILE with columns participant_id, platform_participant_id)"
        )
    out["platform_participant_id"] = out["platform_participant_id"].astype("string").str.strip()
    demo = demographics.drop(columns=[c for c in dropped if c in demographics.columns])
    demo = demo.astype({"platform_participant_id": "string"})
    out = out.merge(demo, on="platform_participant_id", how="left", validate="many_to_one")
    out["demographics_status"] = out["demographics_status"].fillna("not in the demographic export")
    people = out.drop_duplicates(subject)
    status = people["demographics_status"]
    ids = set(out["platform_participant_id"].dropna())
    summary: dict[str, object] = {
        "key": key,
        "n_participants": len(people),
        "n_matched": int((status != "not in the demographic export").sum()),
        "n_unmatched": int((status == "not in the demographic export").sum()),
        "n_consent_revoked": int((status == "consent_revoked").sum()),
        "n_data_expired": int((status == "data_expired").sum()),
        "n_demographic_rows_unused": int(
            (~demographics["platform_participant_id"].isin(ids)).sum()
        ),
    }
    return out, summary


def describe_demographics(
    data: pd.DataFrame, *, subject: str = "participant_id", top: int = 8
) -> pd.DataFrame:
    """One table describing the analysed participants: age, sex, country.

    Parameters
    ----------
    data : pandas.DataFrame
        Output of :func:`join_demographics` (any rows per participant; each counted once).
    subject : str
        Participant column.
    top : int
        Countries listed by name before the rest are pooled as ``other``.

    Returns
    -------
    pandas.DataFrame
        ``variable, level, n, share, mean, sd, min, max``: for ``age`` one row (mean, SD, range
        over participants with an age); for ``sex`` and ``country`` one row per level with its
        count and share of all participants, missing values as the level ``not available``.
    """
    import numpy as np
    import pandas as pd

    people = data.drop_duplicates(subject)
    n = len(people)
    rows: list[dict[str, object]] = []
    if "age" in people.columns:
        age = people["age"].astype(float).dropna()
        rows.append(
            {
                "variable": "age (years)",
                "level": "",
                "n": len(age),
                "share": len(age) / n if n else np.nan,
                "mean": float(age.mean()) if len(age) else np.nan,
                "sd": float(age.std(ddof=1)) if len(age) > 1 else np.nan,
                "min": float(age.min()) if len(age) else np.nan,
                "max": float(age.max()) if len(age) else np.nan,
            }
        )
    for col, label in (("sex", "sex"), ("country", "country of residence")):
        if col not in people.columns:
            continue
        values = people[col].fillna("not available").astype(str)
        counts = values.value_counts()
        named = counts.drop("not available", errors="ignore")
        if len(named) > top:
            pooled = named.iloc[top:].sum()
            named = pd.concat([named.iloc[:top], pd.Series({"other": pooled})])
        if "not available" in counts:
            named = pd.concat([named, pd.Series({"not available": counts["not available"]})])
        for level, k in named.items():
            rows.append({"variable": label, "level": level, "n": int(k), "share": k / n})
    return pd.DataFrame(
        rows, columns=["variable", "level", "n", "share", "mean", "sd", "min", "max"]
    )
