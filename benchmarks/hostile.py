"""The ``hostile`` section: memory stays bounded under a hostile agent, and
what the escaping boundary (``acp_kernel.safe``) costs.

``python -m benchmarks --only hostile`` runs it (``--quick`` for a smoke run).
The runner side (:func:`bench`) writes a scenario for the scripted test agent
(``tests/agents/scripted_agent.py``) and runs the measurements below, each in
a fresh interpreter (``python benchmarks/hostile.py MODE ...`` prints one
JSON object on its last stdout line, as ``workers.py`` does):

  memory    the library client (``Client`` + ``Session.begin/finish``, a
            no-op subscriber, permissions allow-all, interactive) in one
            session: one prompt per step (``--steps noise,unknown,...,turn*50``),
            VmHWM / VmRSS before and after each step
  boundary  ``safe.markdown`` on plain prose, prose with links and inline
            HTML, and a streaming tail re-rendered
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import shlex
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPTED = os.path.join(ROOT, "tests", "agents", "scripted_agent.py")
FINAL = "FINAL-ANSWER"
MIB = 1024 * 1024


# -- sizes ---------------------------------------------------------------------------


def sizes(quick: bool) -> dict[str, int]:
    if quick:
        return {"noise": 2_000, "unknown": 10_000, "unknown_ids": 100, "file_mb": 100, "terminals": 200,
                "permissions": 50, "turns": 5, "chunks": 2_000, "prose_kb": 128, "tail_renders": 20, "rounds": 1}
    return {"noise": 20_000, "unknown": 100_000, "unknown_ids": 1_000, "file_mb": 100, "terminals": 2_000,
            "permissions": 200, "turns": 50, "chunks": 20_000, "prose_kb": 1024, "tail_renders": 100, "rounds": 3}


# -- the scenario (runner side) ---------------------------------------------------------


def scenario(n: dict[str, int], big_file: str) -> dict[str, Any]:
    """Prompts the scripted agent answers, one per step; each ends with the
    ``FINAL`` chunk, the turn's final answer."""
    ghost = ('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ghost-%d","update":'
             '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"boo %d "}}}}')
    unknown = "\n".join(ghost % (i % n["unknown_ids"], i) for i in range(n["unknown"]))
    terminal = {"sessionId": "$SID", "command": "sleep", "args": ["60"], "outputByteLimit": 1 << 30}
    question = {"sessionId": "$SID",
                "toolCall": {"toolCallId": "q", "title": "Delete the workspace", "kind": "delete",
                             "rawInput": {"command": "rm -rf ."}},
                # Nothing allow-all could pick: each one is put to the person, who never answers.
                "options": [{"optionId": "no", "name": "Keep it", "kind": "reject_once"},
                            {"optionId": "yes", "name": "Do it", "kind": "proceed"}]}
    end = [{"chunk": " " + FINAL}]
    return {
        "prompts": {
            "noise": [{"noise_flood": n["noise"]}, *end],
            "unknown": [{"raw": unknown}, *end],
            "bigread": [{"request": {"method": "fs/read_text_file", "params": {"sessionId": "$SID", "path": big_file}}},
                        *end],
            "terminals": [*({"send": {"jsonrpc": "2.0", "id": f"term-{i}", "method": "terminal/create",
                                      "params": terminal}} for i in range(n["terminals"])),
                          {"request": {"method": "terminal/create", "params": terminal}}, *end],
            "permissions": [*({"send": {"jsonrpc": "2.0", "id": f"ask-{i}", "method": "session/request_permission",
                                        "params": {**question, "toolCall": {**question["toolCall"],
                                                                             "toolCallId": f"q{i}"}}}}
                              for i in range(n["permissions"])),
                            {"request": {"method": "session/request_permission", "params": question}}, *end],
            "turn": [{"burst": n["chunks"]}, *end],
        },
    }


def benign(n: dict[str, int]) -> dict[str, Any]:
    return {"prompts": {"turn": [{"burst": n["chunks"]}, {"chunk": " " + FINAL}]}}


# -- the section (runner side) ----------------------------------------------------------


def _run_module() -> Any:
    if __package__:
        from . import run
    else:  # python benchmarks/run.py: benchmarks/ is on sys.path
        import run  # type: ignore[no-redef]
    return run


def bench(ctx: Any) -> list[Any]:
    run = _run_module()
    n = sizes(ctx.args.quick)
    return [memory_section(ctx, run, n), boundary_section(ctx, run, n)]


def _agent(path: str) -> str:
    return " ".join(shlex.quote(p) for p in (sys.executable, SCRIPTED, path))


def memory_section(ctx: Any, run: Any, n: dict[str, int]) -> Any:
    work = os.path.join(ctx.tmp, "hostile")
    os.makedirs(work, exist_ok=True)
    big = os.path.join(work, "sparse.bin")
    with open(big, "wb") as f:
        f.truncate(n["file_mb"] * MIB)
    paths = {}
    for name, data in (("hostile", scenario(n, big)), ("benign", benign(n))):
        paths[name] = os.path.join(ctx.tmp, f"scenario-{name}.json")
        with open(paths[name], "w") as f:
            json.dump(data, f)
    turns = f"turn*{n['turns']}"
    runs = [
        ("baseline", paths["benign"], [turns], []),
        ("hostile", paths["hostile"], ["noise", "unknown", "bigread", "terminals", "permissions", turns], []),
        ("no-compaction", paths["benign"], [turns], ["--detailed-turns", str(n["turns"] + 1)]),
    ]
    script = os.path.abspath(__file__)
    results: dict[str, Any] = {}
    for key, path, steps, extra in runs:
        print(f"  [hostile] memory: {key} ({', '.join(steps)})", file=sys.stderr)
        try:
            results[key] = run.worker(ctx, "memory", "--agent", _agent(path), "--steps", ",".join(steps), *extra,
                                      script=script, cwd=work, timeout=300)
        except (run.Failed, run.subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
            results[key] = {"error": str(exc)}
    os.unlink(big)

    lim = results.get("hostile", {}).get("limits", {})
    sec = run.Section(
        f"Hostile agent: peak RSS growth of the library client, one session "
        f"({n['turns']} turns of {n['chunks']:,} chunks beside the attacks)",
        ["scenario", "peak RSS growth (VmHWM)", "RSS after (VmRSS)", "wall s", "final answer", "what was kept"])
    what = {
        "noise": f"{n['noise']:,} non-JSON stdout lines",
        "unknown": f"{n['unknown']:,} session/update for {n['unknown_ids']:,} unknown session ids",
        "bigread": f"fs/read_text_file of a {n['file_mb']} MB sparse file in the session cwd",
        "terminals": f"{n['terminals']:,} terminal/create (`sleep 60`), never released",
        "permissions": f"{n['permissions']:,} permission requests never answered",
        "turn": f"{n['turns']} turns of {n['chunks']:,} chunks",
    }

    def mib(kib: int) -> str:
        return f"{kib / 1024:+.1f} MiB"

    def add(label: str, r: dict[str, Any], steps: list[dict[str, Any]] | None = None) -> None:
        if "error" in r:
            sec.rows.append([label, "-", "-", "-", "-", f"failed: {r['error']}"])
            return
        answered = sum(s["answered"] for s in r["steps"])
        turns_ = sum(s["turns"] for s in r["steps"])
        st = r["state"]
        kept = f"{st['events_kept']:,} events in {st['turns']} turns ({st['detailed']} whole)"
        if not steps and r["steps"][-1].get("kept"):
            kept += "; " + r["steps"][-1]["kept"]
        sec.rows.append([label, mib(r["hwm_growth_kib"]), mib(r["rss_growth_kib"]), f"{r['seconds']:.2f}",
                         f"{answered}/{turns_}", kept])
        for s in steps or []:
            kept = s.get("kept", "")
            sec.rows.append([f"  step: {what.get(s['name'], s['name'])}", mib(s["hwm_growth_kib"]),
                             mib(s["rss_growth_kib"]), f"{s['seconds']:.2f}", f"{s['answered']}/{s['turns']}", kept])

    add(f"baseline: benign agent, {what['turn']}", results["baseline"])
    add("hostile agent, all steps below in one session", results["hostile"],
        results["hostile"].get("steps"))
    add(f"reference: benign agent, {what['turn']}, detailed_turns {n['turns'] + 1} (no compaction)",
        results["no-compaction"])
    base = results["baseline"]
    if "error" not in base and "error" not in results["hostile"]:
        sec.notes.append(f"hostile minus baseline, peak: "
                         f"{(results['hostile']['hwm_growth_kib'] - base['hwm_growth_kib']) / 1024:+.1f} MiB "
                         f"(start: VmRSS {base['rss0_kib'] / 1024:.0f} MiB after imports and a warm-up turn)")
    sec.notes.append("one fresh interpreter per row: Client(permissions allow-all, interactive) + new_session, a "
                     "warm-up turn, then one prompt per step, each answered by tests/agents/scripted_agent.py; "
                     "growth = after - before (VmHWM: the peak; VmRSS: what is held after the step). A step's peak "
                     "growth is how far it raised the session's peak: 0 means it stayed under an earlier one")
    sec.notes.append("final answer: the turn ended end_turn with the agent's last chunk after the attack; "
                     "each attack step ends with a probe the agent awaits (one more read, terminal or question), "
                     "whose answer is in the turn's text")
    if lim:
        sec.notes.append("limits (acp_kernel.client.host.Limits defaults): " + ", ".join(f"{k} {v:,}" for k, v in lim.items()))
    sec.notes.append("the permission requests offer no option allow-all can pick (reject_once and an unknown "
                     "kind), so each is put to the person, and nobody answers")
    return sec


def boundary_section(ctx: Any, run: Any, n: dict[str, int]) -> Any:
    sec = run.Section(f"Escaping boundary: safe.markdown on {n['prose_kb']:,} KB of agent markdown",
                      ["input", "calls", "KB", "us/KB", "us/call", "vs plain"])
    print("  [hostile] boundary", file=sys.stderr)
    try:
        r = run.worker(ctx, "boundary", "--kb", str(n["prose_kb"]), "--tail-renders", str(n["tail_renders"]),
                       "--rounds", str(n["rounds"]), script=os.path.abspath(__file__), timeout=300)
    except (run.Failed, run.subprocess.TimeoutExpired, OSError, ValueError, KeyError) as exc:
        sec.notes.append(f"failed: {exc}")
        return sec
    plain_us = None
    for case in r["cases"]:
        us_kb = case["seconds"] / (case["bytes"] / 1024) * 1e6
        if plain_us is None:
            plain_us = us_kb
        sec.rows.append([case["label"], f"{case['calls']:,}", f"{case['bytes'] / 1024:,.0f}", f"{us_kb:,.1f}",
                         f"{case['seconds'] / case['calls'] * 1e6:,.0f}", f"{us_kb / plain_us:,.1f}x"])
    sec.notes.append(f"best of {r['rounds']} rounds, in one fresh interpreter after a warm-up call; the first call "
                     f"(imports markdown-it, mdformat, builds the parsers) took {r['cold_ms']:.0f} ms")
    sec.notes.append("plain: no `<` and no `[`, the fast path (controls cleaned, returned as is); with links: a "
                     "markdown link every paragraph and `<b>` every third, which the linked-prose path writes "
                     "without a parse (each link's destination checked, each `<` a reference); with a code span "
                     "too (a reference there would show as written), every block is parsed by markdown-it, "
                     "written back by mdformat and parsed again to check it")
    sec.notes.append(f"tail: the last 4,000 characters of the linked prose, re-rendered {n['tail_renders']} "
                     "times unchanged (safe.markdown caches the last 128 results of text up to 16 KiB, emptied before each "
                     "round: a view "
                     "renders a block again when it completes); growing tail: its prefixes at "
                     f"{n['tail_renders']} lengths, as a view without widgets renders its open tail on each "
                     "refresh (no result cached helps, the links' normalized URLs do: mdfast's cache, emptied "
                     "before each round too; the kernel path's cost is in the `kernel` section)")
    if r.get("fallbacks"):
        sec.notes.append(f"WARNING: {r['fallbacks']} block(s) fell back to a code block")
    return sec


# -- workers (a fresh interpreter each) ------------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


async def _memory(args: argparse.Namespace) -> dict[str, Any]:
    import acp.schema  # noqa: F401  (the services import it on first use: not the attack's cost)

    from acp_kernel.client.host import ClientSettings, Limits
    from acp_kernel.client.registry import adhoc_agent
    from acp_kernel.client.session import Client

    limits = Limits() if args.detailed_turns is None else Limits(detailed_turns=args.detailed_turns)
    settings = ClientSettings(permissions="allow-all", limits=limits)
    client = Client(adhoc_agent(args.agent, name="hostile"), settings=settings, interactive=True)
    await client.start()
    try:
        session = await client.new_session()

        def listener(event: Any) -> None:
            pass

        warm = session.begin("warm-up")
        await session.finish(warm)
        gc.collect()
        hwm0, rss0 = _status_kib("VmHWM"), _status_kib("VmRSS")
        t_all = time.perf_counter()
        steps = []
        for step in args.steps.split(","):
            name, _, times = step.partition("*")
            count = int(times or 1)
            h0, r0 = _status_kib("VmHWM"), _status_kib("VmRSS")
            t0 = time.perf_counter()
            answered = 0
            found: set[str] = set()
            mark = None  # (turns done, VmRSS) once the turns past limits.detailed_turns are compacted
            for i in range(count):
                if i == limits.detailed_turns + 1 and count > i + 1:
                    mark = (i, _status_kib("VmRSS"))
                turn = session.begin(name)
                turn.subscribe(listener)
                await session.finish(turn)
                text = turn.text
                if turn.stop_reason == "end_turn" and text.endswith(FINAL):
                    answered += 1
                found.update("limits." + x for x in re.findall(r"limits\.(\w+)", text))
                if "cancelled" in text and name == "permissions":
                    found.add("the probe: cancelled at once")
            seconds = time.perf_counter() - t0
            kept = ""
            sid = session.id
            if name == "unknown":
                kept = (f"{client._early_count:,} kept for {len(client._early)} ids, "
                        f"{client.early_dropped:,} dropped")
            elif name == "terminals":
                kept = f"{len(client.services.terminals.terminals(sid))} live terminals"
            elif name == "permissions":
                kept = f"{len(client.services.permissions.pending(sid))} questions pending"
            elif name == "noise":
                kept = f"{len(client.reports)} reports kept; {len(turn.events):,} events in the turn"
            elif name == "bigread":
                kept = "refused"
            elif mark is not None:
                per = (_status_kib("VmRSS") - mark[1]) / (count - mark[0])
                kept = (f"after turn {mark[0]}: {per:,.0f} KiB per turn (a compacted turn keeps its final text, "
                        f"{len(turn.text.encode()) / 1024:,.0f} KiB)")
            if found:
                kept += (" (" if kept else "(") + ", ".join(sorted(found)) + ")"
            steps.append({"name": name, "turns": count, "answered": answered, "seconds": seconds,
                          "hwm_growth_kib": _status_kib("VmHWM") - h0, "rss_growth_kib": _status_kib("VmRSS") - r0,
                          "kept": kept})
        seconds = time.perf_counter() - t_all
        state = {"turns": len(session.turns), "detailed": sum(not t.compacted for t in session.turns),
                 "events_kept": sum(len(t.events) for t in session.turns)}
        result = {"seconds": seconds, "steps": steps, "state": state, "hwm0_kib": hwm0, "rss0_kib": rss0,
                  "hwm_growth_kib": _status_kib("VmHWM") - hwm0, "rss_growth_kib": _status_kib("VmRSS") - rss0,
                  "limits": {k: getattr(limits, k) for k in ("file_read_bytes", "terminals_per_session",
                                                             "pending_prompts", "unknown_session_updates",
                                                             "detailed_turns")}}
        return result
    finally:
        await client.close()


def memory(args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(_memory(args))


WORDS = ("the agent read the file and found that the function returns early when the list is empty so the "
         "caller never sees the error it expects and the test passes for the wrong reason").split()


def prose(kb: int, links: bool, code: bool = False) -> list[str]:
    """``kb`` KB of paragraphs (~400 characters), in blocks of about 4,000 characters;
    with ``code``, a code span every third paragraph beside its ``<b>``."""
    paras: list[str] = []
    total, i = 0, 0
    while total < kb * 1024:
        words = [WORDS[(i * 7 + j) % len(WORDS)] for j in range(64)]
        if links:
            words[10] = f"[the docs](https://example.com/docs/{i}#section)"
            if i % 3 == 0:
                words[30] = "<b>important</b>"
                if code:
                    words[40] = "`len(items)`"
        para = " ".join(words).capitalize() + "."
        paras.append(para)
        total += len(para) + 2
        i += 1
    blocks, cur = [], ""
    for para in paras:
        cur = f"{cur}\n\n{para}" if cur else para
        if len(cur) >= 4000:
            blocks.append(cur)
            cur = ""
    if cur:
        blocks.append(cur)
    return blocks


def boundary(args: argparse.Namespace) -> dict[str, Any]:
    from acp_kernel import safe

    t0 = time.perf_counter()
    safe.markdown("warm ![up](https://example.com) <b>x</b>")  # an image: the parse
    cold_ms = (time.perf_counter() - t0) * 1000
    plain_blocks = prose(args.kb, links=False)
    link_blocks = prose(args.kb, links=True)
    code_blocks = prose(args.kb, links=True, code=True)
    tail = "\n\n".join(link_blocks)[-4000:]
    # As a view without widgets streams it: each refresh renders the tail as it has grown (no two alike).
    growing = [tail[: len(tail) * (i + 1) // args.tail_renders] for i in range(args.tail_renders)]
    cases = [
        ("plain prose, 4,000-char blocks (fast path)", plain_blocks),
        ("prose with a link per paragraph + inline `<b>` (linked-prose path)", link_blocks),
        ("the same + a code span beside each `<b>` (parse, mdformat, check)", code_blocks),
        (f"streaming tail: 4,000 chars with links, re-rendered {args.tail_renders}x", [tail] * args.tail_renders),
        (f"growing tail: 4,000 chars with links, rendered at {args.tail_renders} lengths", growing),
    ]
    fallbacks = sum(str(safe.markdown(b)).startswith("```") for b in link_blocks[:20] + code_blocks[:20])
    # Each round starts with nothing cached (an earlier round's results): safe.markdown's
    # results and mdfast's normalized URLs (mdfast is imported by the warm-up call).
    mdfast = sys.modules.get("acp_kernel.mdfast")
    caches = [getattr(safe, "_parsed_cached", None), getattr(mdfast, "_normalize_link_cached", None),
              getattr(mdfast, "_normalize_link_text_cached", None)]
    out = []
    for label, blocks in cases:
        best = float("inf")
        for _ in range(args.rounds):
            gc.collect()
            for cached in caches:
                if cached is not None:
                    cached.cache_clear()
            t0 = time.perf_counter()
            for b in blocks:
                safe.markdown(b)
            best = min(best, time.perf_counter() - t0)
        out.append({"label": label, "calls": len(blocks), "bytes": sum(len(b.encode()) for b in blocks),
                    "seconds": best})
    return {"cases": out, "cold_ms": cold_ms, "rounds": args.rounds, "fallbacks": fallbacks}


MODES = {"memory": memory, "boundary": boundary}


def main(argv: list[str] | None = None) -> int:
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    p = argparse.ArgumentParser(description="one hostile-section measurement in a fresh process")
    p.add_argument("mode", choices=sorted(MODES))
    p.add_argument("--agent", help="memory: agent command line (shell syntax)")
    p.add_argument("--steps", default="turn", help="memory: prompts in order, NAME or NAME*COUNT, comma-separated")
    p.add_argument("--detailed-turns", type=int, help="memory: limits.detailed_turns (default: the Limits default)")
    p.add_argument("--kb", type=int, default=1024, help="boundary: KB of prose")
    p.add_argument("--tail-renders", type=int, default=100, help="boundary: renders of the 4,000-char tail")
    p.add_argument("--rounds", type=int, default=3, help="boundary: rounds (best is kept)")
    args = p.parse_args(argv)
    sys.stdout.write(json.dumps(MODES[args.mode](args)) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
