"""txvfs in ten lines: several files change in one transaction, all or nothing."""

import sys
import tempfile

import txvfs

with tempfile.TemporaryDirectory() as tmp, txvfs.open(tmp + "/store") as store:
    with store.transaction() as tx:  # commit on success, rollback on error
        tx.makedirs("/docs", exist_ok=True)
        with tx.open("/docs/a.txt", "w") as f:  # a real io.TextIOWrapper
            f.write("part one")
        tx.write_bytes("/docs/b.txt", b"part two")  # nobody sees a.txt before b.txt
    print(store.listdir("/docs"), store.read_text("/docs/a.txt"))

print("done", file=sys.stderr)
