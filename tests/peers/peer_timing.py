"""Timing shared by the embed peers (hf_embed.py, st_embed.py, clip_embed.py): the median wall and CPU
seconds of a call, after one warm-up call, as retro-bench embed times RetroKit (side_by_side.h)."""
import statistics
import time


def median_seconds(fn, repeats):
    """(wall, CPU of all threads) medians of `repeats` calls of fn() after a warm-up call."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)
