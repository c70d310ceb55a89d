"""txvfs through fsspec: an atomic multi-file update and a pandas CSV round trip."""

import tempfile

import fsspec
import pandas as pd
import txvfs.fsspec  # noqa: F401  (registers "txvfs" when the package is not pip-installed)

with tempfile.TemporaryDirectory() as tmp:
    fs = fsspec.filesystem("txvfs", store=tmp + "/store")
    fs.pipe_file("/data/old.csv", b"x,y\n0,0\n")
    with fs.transaction:  # one txvfs transaction: readers see both changes or neither
        fs.pipe_file("/data/new.csv", b"x,y\n1,2\n3,4\n")
        fs.rm("/data/old.csv")
    print(sorted(fs.ls("/data", detail=False)))
    with fsspec.open("txvfs:///data/new.csv", "rt", store=tmp + "/store") as f:
        print(f.read().splitlines())
    df = pd.read_csv("txvfs:///data/new.csv", storage_options={"store": tmp + "/store"})
    print("pandas sum:", int(df["y"].sum()))
