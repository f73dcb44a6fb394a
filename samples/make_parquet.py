"""Regenerate samples/tickets.parquet from samples/tickets.jsonl (same rows, same columns).

    .venv/bin/python samples/make_parquet.py
"""
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent


def main() -> None:
    rows = [json.loads(line) for line in (HERE / "tickets.jsonl").read_text("utf-8").splitlines() if line.strip()]
    table = pa.Table.from_pylist(rows)
    # Small row groups so the reader's streaming path is exercised on the sample too.
    pq.write_table(table, HERE / "tickets.parquet", row_group_size=16)
    print(f"wrote {len(rows)} rows to {HERE / 'tickets.parquet'}")


if __name__ == "__main__":
    main()
