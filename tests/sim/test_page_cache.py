"""The page cache of small files: writeback by age, torn writebacks, renames (sim/page_cache.py)."""

from __future__ import annotations

from sim.page_cache import MISSING, PageCache

S = 1_000_000  # µs


def cache(bandwidth: int = 10**12) -> PageCache:
    return PageCache(30 * S, 5 * S, bandwidth)


def test_a_write_reaches_the_disk_at_the_first_flusher_wake_up_30_s_after_it_was_dirtied():
    pc = cache()
    pc.write("f", "v1", 10, 12 * S)
    for now, expected in ((41 * S, MISSING), (44_999_999, MISSING), (45 * S, "v1")):
        probe = cache()
        probe.write("f", "v1", 10, 12 * S)
        probe.power_loss(now)
        assert probe.read("f") == expected, now


def test_a_file_rewritten_every_5_s_is_written_back_every_30_s_with_its_content_then():
    pc = cache()
    for t in range(10, 80, 5):
        pc.write("f", t, 10, t * S)
    pc.power_loss(77 * S)
    # dirty from 10 s: written back at 40 s (before the 40 s write: content 35); dirty from
    # 40 s: written back at 70 s with 65
    assert pc.read("f") == 65


def test_a_power_loss_during_a_writeback_tears_the_file():
    pc = cache(bandwidth=1_000)  # 1 KB/s: writing 100 bytes back takes 0.1 s
    pc.write("f", "old", 100, 0)
    pc.fsync("f", 1 * S)
    pc.write("f", "new", 100, 2 * S)
    pc.power_loss(35 * S + 50_000)  # the writeback started at 35 s, ends at 35.1 s
    assert pc.read("f") is MISSING


def test_fsync_and_a_process_crash_keep_the_content():
    pc = cache()
    pc.write("f", "v", 10, 0)
    assert pc.read("f") == "v"  # a process crash: the page cache is the file
    pc.fsync("f", 1 * S)
    pc.write("f", "w", 10, 2 * S)
    pc.power_loss(3 * S)
    assert pc.read("f") == "v"


def test_a_file_renamed_into_place_keeps_the_disk_state_of_the_new_inode():
    pc = cache()
    pc.write("f", "durable", 10, 0)
    pc.fsync("f", 0)
    pc.write("f.tmp", "fresh", 10, 1 * S)
    pc.delete("f")
    pc.rename("f.tmp", "f")
    assert pc.read("f") == "fresh"
    pc.power_loss(2 * S)
    assert pc.read("f") is MISSING and pc.read("f.tmp") is MISSING  # never written back: empty
