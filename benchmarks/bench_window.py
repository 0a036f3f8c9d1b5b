"""Time WorkingMemory window builds over a long history (issue 5 target: 10k messages in <= 20 ms).

Run: .venv/bin/python benchmarks/bench_window.py [--messages 10000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from memlineage.window import ChatMessage, ToolCall, WorkingMemory

WORDS = ("memory lineage policy window token budget retrieval Paris hotel flight price 记忆 检索 北京 天气").split()


def make_history(n: int, seed: int = 0) -> list[ChatMessage]:
    rng = random.Random(seed)
    out = [ChatMessage(role="system", content="You are a helpful travel agent. Be concise.")]
    i = 0
    while len(out) < n:
        i += 1
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))
        out.append(ChatMessage(role="user", content=text))
        if rng.random() < 0.3:
            calls = tuple(
                ToolCall(id=f"c{i}_{j}", name="search_flights", arguments=json.dumps({"q": text[:40], "j": j}))
                for j in range(rng.randint(1, 3))
            )
            out.append(ChatMessage(role="assistant", tool_calls=calls))
            out.extend(ChatMessage(role="tool", tool_call_id=c.id, content=text[:200]) for c in calls)
        out.append(ChatMessage(role="assistant", content=text[::-1]))
    return out[:n]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    history = make_history(args.messages)
    t0 = time.perf_counter()
    evicted: list[ChatMessage] = []
    wm = WorkingMemory(context_window=128_000, on_evict=evicted.extend)
    wm.extend(history)
    t_add = time.perf_counter() - t0
    results = {}
    for label, budget in (
        ("default (40% of 128k = 51,200)", None),
        ("4,000", 4_000),
        ("0", 0),
        ("1,000,000 (all fit)", 1_000_000),
    ):
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            win = wm.window(budget)
            times.append((time.perf_counter() - t) * 1000)
        results[label] = (statistics.median(times), max(times), len(win.messages), win.tokens)

    class CopyOnRead:
        def messages(self) -> list[ChatMessage]:
            return [m.model_copy() for m in history]

    wm2 = WorkingMemory(context_window=128_000, history=CopyOnRead())
    wm2.window()
    times, copy_times = [], []
    for _ in range(max(3, args.repeat // 4)):
        t = time.perf_counter()
        CopyOnRead().messages()
        copy_times.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        wm2.window()
        times.append((time.perf_counter() - t) * 1000)
    print(f"history: {len(history)} messages; first add + token counting: {t_add * 1000:.0f} ms (one-off)")
    print(f"{'history budget (tokens)':34} {'median ms':>10} {'max ms':>8} {'in window':>10} {'tokens':>8}")
    for label, (med, mx, nmsg, tok) in results.items():
        print(f"{label:34} {med:10.2f} {mx:8.2f} {nmsg:10d} {tok:8d}")
    cor = statistics.median(times) - statistics.median(copy_times)
    print(
        f"{'copy-on-read backend (default)':34} {cor:10.2f} {'':8}   (window only; the backend's own"
        f" copying took {statistics.median(copy_times):.1f} ms more)"
    )
    target = results["default (40% of 128k = 51,200)"][0]
    print(f"target <= 20 ms for 10k messages: {'PASS' if target <= 20 else 'FAIL'} ({target:.2f} ms)")


if __name__ == "__main__":
    main()
