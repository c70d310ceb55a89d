"""The change feed from Python (issue 31): the blocking iterator, wait with a timeout, the
asyncio async iterator, filters, resuming from a cursor, and clear errors for bad input."""

import asyncio
import errno
import threading

import pytest


@pytest.fixture
def fed(disk_store):
    disk_store.set_change_feed(True)
    return disk_store


def test_iterator_reports_each_change_in_commit_order(fed):
    w = fed.watch()
    fed.makedirs("/d")
    fed.write_bytes("/d/a", b"1")
    fed.rename("/d/a", "/d/b")
    fed.remove("/d/b")
    got = [(c.kind, c.path, c.to) for _, c in zip(range(4), w, strict=False)]
    assert got == [
        ("created", "/d", None),
        ("created", "/d/a", None),
        ("renamed", "/d/a", "/d/b"),
        ("removed", "/d/b", None),
    ]


def test_wait_times_out_empty_and_wakes_for_a_commit_of_another_thread(fed):
    w = fed.watch()
    assert w.wait(0.05) == []
    t = threading.Timer(0.05, lambda: fed.write_bytes("/late", b"x"))
    t.start()
    got = w.wait(60)
    t.join()
    assert [(c.kind, c.path) for c in got] == [("created", "/late")]


def test_filters_by_prefix_and_kind(fed):
    w = fed.watch(prefix="/keep", kinds=["created"])
    fed.makedirs("/keep")
    fed.write_bytes("/other", b"x")
    fed.write_bytes("/keep/a", b"x")
    fed.remove("/keep/a")
    assert [c.path for c in w.poll()] == ["/keep", "/keep/a"]


def test_resume_from_a_saved_cursor(fed):
    w = fed.watch()
    for i in range(6):
        fed.write_bytes(f"/f{i}", b"x")
    first = w.poll()
    saved = first[2].cursor
    w.close()
    rest = fed.watch(since=saved).poll()
    assert [c.path for c in rest] == [c.path for c in first[3:]]


def test_asyncio_async_iterator(fed):
    async def main():
        w = fed.watch()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, lambda: fed.write_bytes("/async", b"x"))
        async for change in w:
            return change

    change = asyncio.run(asyncio.wait_for(main(), 60))
    assert (change.kind, change.path, change.type) == ("created", "/async", "file")


def test_bad_input_raises_clear_errors(fed, store):
    with pytest.raises(OSError) as e:
        fed.watch(since="not-a-cursor")
    assert e.value.errno == errno.EINVAL and "not a change feed cursor" in str(e.value)
    with pytest.raises(ValueError, match="unknown change kind"):
        fed.watch(kinds=["exploded"])
    with pytest.raises(OSError, match="off"):
        store.watch()  # the feed of this one is off
    store.set_change_feed(True)
    with pytest.raises(OSError, match="another store"):
        fed.watch(since=store.watch().cursor)
    w = fed.watch()
    w.close()
    with pytest.raises(ValueError):
        w.poll()
    with pytest.raises(OSError):
        fed.watch().wait(-1)
