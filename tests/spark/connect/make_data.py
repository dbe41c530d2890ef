"""Writes the small, deterministic inputs of the reference projects:

    data/impressions/part-0000{0..3}.json   ad impressions, file k = minute k
    data/clicks/part-0000{0..3}.json        clicks, file k = minute k

JSON lines, timestamps ISO-8601 UTC with a trailing Z. No randomness: the
rows are listed here. Run: python tests/spark/connect/make_data.py

What the rows exercise (see README.md):
- impressions carry duplicate impression_ids (i03 twice in file 0, i07 in
  files 1 and 2, i11 in file 2 with a later ts) for
  dropDuplicatesWithinWatermark, and one row (i14, file 3) far older than
  the watermark, which the watermarked queries drop;
- country US/FR/DE rows for the filter and the windowed count;
- clicks 5-70 s after an impression of the same ad_id and user: those within
  the join's 0-60 s range join, the others do not; file 2 holds a click
  whose ad had no impression.

Spark's file source orders files by modification time, so the scripts that
run these copy them and set mtimes in name order (git keeps none).
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")

T = "2024-01-01T00:{:02d}:{:02d}Z"


def ts(m, s):
    return T.format(m, s)


# (impression_id, minute, second, ad_id, user_id, country)
IMPRESSIONS = [
    [
        ("i01", 0, 5, "a1", "u1", "US"),
        ("i02", 0, 12, "a2", "u2", "FR"),
        ("i03", 0, 20, "a1", "u3", "US"),
        ("i03", 0, 20, "a1", "u3", "US"),
        ("i04", 0, 41, "a3", "u1", "DE"),
        ("i05", 0, 55, "a2", "u4", "US"),
    ],
    [
        ("i06", 1, 3, "a1", "u2", "FR"),
        ("i07", 1, 18, "a3", "u3", "US"),
        ("i08", 0, 58, "a2", "u1", "US"),
        ("i09", 1, 40, "a1", "u4", "DE"),
        ("i10", 1, 52, "a2", "u2", "US"),
    ],
    [
        ("i07", 1, 18, "a3", "u3", "US"),
        ("i11", 2, 1, "a1", "u1", "US"),
        ("i12", 2, 25, "a3", "u4", "FR"),
        ("i11", 2, 30, "a1", "u1", "US"),
        ("i13", 2, 50, "a2", "u3", "DE"),
    ],
    [
        ("i14", 0, 30, "a1", "u2", "US"),
        ("i15", 3, 10, "a3", "u1", "US"),
        ("i16", 3, 33, "a1", "u2", "FR"),
        ("i17", 3, 59, "a2", "u4", "US"),
    ],
]

# (click_id, minute, second, ad_id, user_id)
CLICKS = [
    [
        ("c01", 0, 15, "a1", "u1"),
        ("c02", 0, 50, "a2", "u2"),
    ],
    [
        ("c03", 1, 10, "a1", "u3"),
        ("c04", 1, 30, "a3", "u3"),
        ("c05", 1, 59, "a2", "u4"),
    ],
    [
        ("c06", 2, 10, "a9", "u9"),
        ("c07", 2, 20, "a2", "u2"),
        ("c08", 2, 40, "a1", "u1"),
    ],
    [
        ("c09", 3, 30, "a3", "u1"),
        ("c10", 3, 50, "a1", "u2"),
    ],
]


def write(dirname, files, row):
    d = os.path.join(DATA, dirname)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        os.remove(os.path.join(d, name))
    for k, rows in enumerate(files):
        with open(os.path.join(d, f"part-{k:05d}.json"), "w") as f:
            for r in rows:
                f.write(json.dumps(row(r), separators=(",", ":")) + "\n")


def main():
    write(
        "impressions",
        IMPRESSIONS,
        lambda r: {"impression_id": r[0], "ts": ts(r[1], r[2]), "ad_id": r[3], "user_id": r[4], "country": r[5]},
    )
    write("clicks", CLICKS, lambda r: {"click_id": r[0], "ts": ts(r[1], r[2]), "ad_id": r[3], "user_id": r[4]})


if __name__ == "__main__":
    main()
