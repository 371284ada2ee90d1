"""Timing shared by the embed peers (hf_embed.py, st_embed.py, clip_embed.py): the median wall and CPU
seconds of a call, after one warm-up call, as retro-bench embed times RetroKit (side_by_side.h), and the JSON line
a text peer prints (the fields retro-bench embed prints for RetroKit)."""
import json
import os
import platform
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


def print_text_result(impl, args, texts, lengths, secs, cpu_secs, tok_s):
    """One JSON line: `texts` embedded in `secs` wall (`cpu_secs` CPU) seconds, `tok_s` of them tokenising, at the
    token counts `lengths`; model, batch, max_length, threads and device as `args` gave them."""
    print(json.dumps({
        "impl": impl,
        "model": os.path.abspath(args.model),
        "chunks": len(texts),
        "tokens_per_chunk": sum(lengths) / len(lengths),
        "batch": args.batch,
        "max_length": args.max_length,
        "threads": args.threads,
        "device": args.device,
        "seconds": secs,
        "cpu_seconds": cpu_secs,
        "tokenize_seconds": tok_s,
        "chunks_per_s": len(texts) / secs,
        "chunks_per_cpu_s": len(texts) / cpu_secs,
        "python": platform.python_version(),
    }))
