from acp_kernel.view.coalesce import Coalescer


class FakeLoop:
    def __init__(self, clock):
        self.clock = clock
        self.timers = []

    def call_later(self, delay, fn):
        handle = Handle(self.clock.now + delay, fn)
        self.timers.append(handle)
        return handle

    def advance(self, dt):
        self.clock.now += dt
        due = [h for h in self.timers if h.when <= self.clock.now and not h.cancelled]
        self.timers = [h for h in self.timers if h not in due]
        for h in due:
            h.fn()


class Handle:
    def __init__(self, when, fn):
        self.when, self.fn, self.cancelled = when, fn, False

    def cancel(self):
        self.cancelled = True


class Clock:
    now = 100.0

    def __call__(self):
        return self.now


def make(rate=10.0):
    clock = Clock()
    loop = FakeLoop(clock)
    calls = []
    c = Coalescer(lambda: calls.append(clock.now), rate, clock=clock, get_loop=lambda: loop)
    return c, loop, calls


def test_first_poke_flushes_at_once_then_one_flush_per_interval():
    c, loop, calls = make()
    for _ in range(1000):
        c.poke()
    assert calls == [100.0]
    assert len(loop.timers) == 1
    loop.advance(0.1)
    assert len(calls) == 2
    for _step in range(50):  # 5 s of pokes every 10 ms
        c.poke()
        loop.advance(0.01)
    assert 2 + 49 // 10 <= len(calls) <= 2 + 50 // 10 + 1


def test_no_flush_without_changes():
    c, loop, calls = make()
    c.poke()
    loop.advance(1.0)
    assert calls == [100.0]
    assert loop.timers == []


def test_flush_now_and_close():
    c, loop, calls = make()
    c.poke()
    c.poke()
    c.flush_now()
    assert len(calls) == 2
    assert all(h.cancelled for h in loop.timers)
    c.poke()
    c.close()
    assert len(calls) == 3
    c.poke()
    loop.advance(1)
    assert len(calls) == 3


def test_without_a_loop_the_next_poke_after_the_interval_flushes():
    clock = Clock()
    calls = []
    c = Coalescer(lambda: calls.append(1), 10.0, clock=clock, get_loop=lambda: None)
    c.poke()
    c.poke()
    assert len(calls) == 1
    clock.now += 0.2
    c.poke()
    assert len(calls) == 2


def test_a_blocked_loop_still_flushes_from_pokes():
    """Synchronous work on the loop's thread (the notebook server's execute)
    keeps the scheduled flush from firing; pokes a whole interval late flush."""
    c, loop, calls = make()
    c.poke()
    c.poke()  # schedules the next flush at 100.1
    assert calls == [100.0] and len(loop.timers) == 1
    loop.clock.now += 0.15  # the timer is due but the loop is blocked: it does not fire
    c.poke()
    assert calls == [100.0]  # not yet a whole interval late
    loop.clock.now += 0.1
    c.poke()
    assert calls == [100.0, 100.25]
    assert loop.timers[0].cancelled


def test_pokes_while_held_make_one_poke_at_the_release():
    """A run of events (one read) holds the pokes: none flushes or schedules until the
    release, which pokes once; a release with nothing poked does nothing; holds nest."""
    c, loop, calls = make()
    c.hold()
    c.hold()
    for _ in range(100):
        c.poke()
    c.release()
    assert calls == [] and loop.timers == []
    c.release()
    assert calls == [100.0] and loop.timers == []
    c.hold()
    c.release()
    assert calls == [100.0] and loop.timers == []
    c.hold()
    c.poke()
    c.release()  # within the interval: scheduled, as a poke is
    assert calls == [100.0] and len(loop.timers) == 1
    loop.advance(0.1)
    assert calls == [100.0, 100.1]


def test_a_flush_while_held_sends_what_was_poked():
    c, loop, calls = make()
    c.hold()
    c.poke()
    c.flush_now()
    assert calls == [100.0]
    c.release()  # nothing changed since: no poke
    assert calls == [100.0] and loop.timers == []
