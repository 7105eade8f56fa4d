"""The physical cores of one launch running at the same time, and their meeting points.

A new-dialect launch with LNC=2 (``kernel[2](...)``) runs its two instances on two threads, one per
physical NeuronCore, because the cross-core instructions (``nisa.core_barrier``, ``nisa.sendrecv``) and
``nki.collectives`` block until the other core arrives, as on the device. Every such instruction is an
*exchange*: the cores it names each deposit a value (a copy of what they send) at a meeting point and
continue once all of them have; the k-th exchange a core makes under a key (a barrier's cores, a pipe id, a
collective's group) meets the k-th exchange of the others under the same key.

The device would hang where a core waits for one that never comes. Here the wait is judged whenever a core
starts to wait or finishes: when every core that has not finished is waiting and no meeting point is
complete, no core can move again, and the launch raises one :class:`DeadlockError` naming every core's
instruction and kernel line. An exception on one core stops the others at their next instruction or
wait (:class:`CoreStopped`), and the launch raises that one exception.

Between meetings the cores keep pace where it shows: the effects one core's instructions have on shared HBM
(``nl.shared_hbm``: the kernel's arguments and outputs) and the other core's take place in the order of the
instructions' numbers, as on the device, whose cores run the same kernel at the same clock. An instruction
reads its operands before it is counted (Costs._tick) and writes its results after: core ``c``'s writes at
its count ``k`` and its reads for its instruction ``k`` go before core ``c'``'s at ``k'`` when
``(k, c) < (k', c')``. A core publishes its count without a lock (:meth:`CoreGroup.advance`) and waits only
before it touches shared HBM (:meth:`CoreGroup.sync`), until every other running core is past it in that
order; what it computes on its own SBUF and PSUM nothing else can see, so the cores run freely in between, and
no other core touches shared HBM until this one's instruction is done. Free-running threads without this would
let one core finish the kernel before the other starts (the GIL runs one for milliseconds at a time), so what
one core's shared-HBM writes overwrite of the other's would depend on the thread scheduler; in this order it
is the same on every run and as on the device (e.g. both cores zero an output before either stores its rows
into it).

One core runs at a time: a core holds the group's turn while it runs and gives it up only where it waits (in
:meth:`sync`, at a meeting point, at its end). The GIL would serialise the cores' Python anyway, and threads
that all want it hand it over at every numpy call that releases it (thousands of context switches a second,
each refilling the caches with another core's SBUF); a core that waits for the turn sleeps on a lock of its
own. A 2-core mixture-of-experts launch took 1.35-1.50x the wall time of the same instructions on one core
with free-running threads, 1.15-1.43x with the turn (bench/nki_simulator.py, ``--only lnc2``).

A core may announce its next instruction before it has started it (:meth:`CoreGroup.announce`) while it
computes something of its own that needs no lock (nc_matmul's product, GIL-free in BLAS): it lends the turn
meanwhile, so the other core runs beside the product, and a core waiting in :meth:`sync` for it may go on. It
pays only with a CPU to spare; on a loaded machine the woken core queues behind the computing one
(docs/nki.md), so :class:`Headroom` allows it only while other processes leave most of a CPU free
(``TORCHNEURON_EXT_NKI_CORE_OVERLAP``: ``auto``, the default; ``0`` never, ``1`` always).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Optional

from .errors import NKIError, _kernel_location

# A wait that outlives this (seconds) while the core it waits for still runs is reported rather than kept
# up: a kernel whose other core computes this long between two meetings is not one the simulator runs.
WAIT_LIMIT_S = float(os.environ.get("TORCHNEURON_EXT_NKI_CORE_WAIT_S", "300"))

# Whether a core announces its next instruction before computing its product (CoreGroup.announce): "auto" (the
# default: when Headroom finds a CPU free of other processes), "0" (never) or "1" (always). Results are the same
# either way. On an idle 2-core host it cut the E=8 MoE launch's wall time by about a fifth; on a loaded one
# it gained nothing, which is why "auto" asks for a free CPU (docs/nki.md, issue 29 item 5).
OVERLAP_ENV = "TORCHNEURON_EXT_NKI_CORE_OVERLAP"


_NEVER = 1 << 62


class CoreStopped(BaseException):
    """Raised on a core when another core of its launch failed: unwinds the kernel without being caught
    by a kernel's ``except Exception``; the launch raises the other core's error instead."""


class DeadlockError(NKIError):
    """Cores of one launch wait for each other in a way none can leave (the device would hang). Its code,
    ``deadlock``, is the simulator's: the toolchain cannot see this, the device just stops."""


class _Wait:
    __slots__ = ("key", "generation", "participants", "what", "where")

    def __init__(self, key: Any, generation: int, participants: tuple, what: str, where: Optional[tuple]) -> None:
        self.key, self.generation, self.participants, self.what, self.where = \
            key, generation, participants, what, where


class CoreGroup:
    """The cores of one launch: their state (running, waiting, done) and the meeting points between them."""

    # How long a wait sleeps before it looks at the stop flag and the wait limit itself; every change it waits
    # for also wakes it.
    POLL_S = 1.0

    def __init__(self, count: int, kernel_name: str, cores_per_rank: Optional[int] = None) -> None:
        """``count`` threads; with ``cores_per_rank``, thread g is core g % cores_per_rank of rank
        g // cores_per_rank (a launch on several ranks), else core g of the one rank."""
        self.count, self.kernel_name = count, kernel_name
        self.cores_per_rank = cores_per_rank
        self._cond = threading.Condition()
        self._done = [False] * count
        self._waits: list[Optional[_Wait]] = [None] * count
        self._generations: list[dict] = [{} for _ in range(count)]
        self._slots: dict = {}      # (key, generation) -> {core: value}
        self._taken: dict = {}      # (key, generation) -> cores that have read the complete slot
        self.error: Optional[BaseException] = None
        self.stop = threading.Event()
        self._clocks = [0] * count  # instructions each core has started (advance)
        # Per core, the clock at which a core waiting in sync for it needs waking (_NEVER: none waits).
        self._wake_at = [_NEVER] * count
        # Held by the core whose Python runs; the others block on it, not on the GIL (see the docstring).
        self._turn = threading.Lock()
        self._holding = [False] * count
        self._lent = [False] * count  # gave the turn away while computing an announced product (announce)
        self.headroom = Headroom.from_env(os.environ.get(OVERLAP_ENV, "auto"))

    # -- running the cores ---------------------------------------------------------------------------------
    def run(self, body: Callable[[int], Any]) -> list:
        """``body(core)`` on one thread per core; their results in core order, or the first error raised."""
        results: list = [None] * self.count

        def main(core: int) -> None:
            try:
                self._take_turn(core)
                results[core] = body(core)
            except CoreStopped:
                pass
            except BaseException as e:  # noqa: B036 - handed to the launch's thread and raised there
                self._failed(e)
            finally:
                self._give_turn(core)
                with self._cond:
                    self._done[core] = True
                    self._judge()
                    self._cond.notify_all()

        threads = [threading.Thread(target=main, args=(c,), name=f"nki-core-{c}", daemon=True)
                   for c in range(self.count)]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except BaseException:  # KeyboardInterrupt in the caller: let the cores unwind too
            self.stop.set()
            with self._cond:
                self._cond.notify_all()
            raise
        if self.error is not None:
            raise self.error.with_traceback(self.error.__traceback__)
        return results

    def advance(self, core: int, clock: int) -> None:
        """Core ``core`` has started its instruction number ``clock``. Called by the core's own thread on every
        instruction, so it takes no lock: it wakes the cores waiting in :meth:`sync` only once one needs it."""
        if self._lent[core]:
            self._lent[core] = False
            self._take_turn(core)  # back from an announced product
        if clock <= self._clocks[core]:
            return  # moved on already by a read (sync) or an announcement
        self._clocks[core] = clock
        # Read after the write (the GIL orders them): a waiter sets its wish before it reads the clock, so
        # either it sees this clock or this sees its wish.
        if clock >= self._wake_at[core]:
            with self._cond:
                self._wake_at[core] = _NEVER
                self._cond.notify_all()

    def sync(self, core: int, clock: int) -> None:
        """Core ``core`` touches shared HBM at instruction ``clock`` (its current one for a write; the next for
        a read, whose values the instruction consumes once it is counted): wait until every other running
        core (neither finished nor waiting at a meeting point, where it cannot move until this one may) is
        past it in the cores' order, ``(clock, core)``, at equal counts the lower core number first."""
        clocks = self._clocks
        if clock > clocks[core]:
            # A read moves this core's count on to the instruction it reads for: its own earlier instructions'
            # shared effects are done, and cores that wait for it to get that far may go on.
            self.advance(core, clock)
        clock = clocks[core]
        # The clock each other core must reach: (theirs, c) > (clock, core).
        if all(clocks[c] >= clock + (c < core) for c in range(self.count) if c != core):
            return
        turn = self._give_turn(core)
        with self._cond:
            while True:
                behind = [c for c in range(self.count)
                          if c != core and not self._done[c] and self._waits[c] is None
                          and clocks[c] < clock + (c < core)]
                if not behind:
                    break
                for c in behind:
                    self._wake_at[c] = min(self._wake_at[c], clock + (c < core))
                if any(clocks[c] < clock + (c < core) for c in behind):
                    if self.stop.is_set():
                        raise CoreStopped()
                    self._cond.wait(timeout=self.POLL_S)
        if turn:
            self._take_turn(core)

    def _take_turn(self, core: int) -> None:
        """Wait until no other core runs: one core's Python at a time (see the module's docstring)."""
        self._turn.acquire()
        self._holding[core] = True

    def _give_turn(self, core: int) -> bool:
        """Let another core run while this one waits or computes without the GIL; whether it had the turn."""
        if not self._holding[core]:
            return False
        self._holding[core] = False
        self._turn.release()
        return True

    def announce(self, core: int, clock: int) -> None:
        """Core ``core`` will start instruction ``clock`` next and, until it does, touches nothing another
        core can see: the cores waiting for it may go on meanwhile, as if it had started it. A no-op unless
        the machine has a CPU to spare for it (``headroom``)."""
        if self.headroom.spare():
            self.advance(core, clock)
            self._lent[core] = self._give_turn(core)  # taken back by advance

    def _failed(self, error: BaseException) -> None:
        with self._cond:
            if self.error is None:
                self.error = error
            self.stop.set()
            self._cond.notify_all()

    # -- meeting points ------------------------------------------------------------------------------------
    def exchange(self, core: int, key: Any, participants: tuple, value: Any, what: str) -> dict:
        """Deposit ``value`` at this core's next meeting point under ``key`` with ``participants`` (core
        numbers, this one included) and wait for theirs: {core: value} of every participant."""
        where = _kernel_location(None)
        turn = self._give_turn(core)
        with self._cond:
            if self.stop.is_set():
                raise CoreStopped()
            gen = self._generations[core].get(key, 0)
            self._generations[core][key] = gen + 1
            slot_key = (key, gen)
            slot = self._slots.setdefault(slot_key, {})
            slot[core] = value
            self._waits[core] = _Wait(key, gen, participants, what, where)
            self._judge()
            self._cond.notify_all()
            started = time.monotonic()
            while not all(p in slot for p in participants):
                if self.stop.is_set():
                    self._waits[core] = None
                    raise CoreStopped()
                self._cond.wait(timeout=self.POLL_S)
                if time.monotonic() - started > WAIT_LIMIT_S and not self.stop.is_set():
                    missing = [p for p in participants if p not in slot]
                    self._waits[core] = None
                    raise DeadlockError.at("deadlock", f"{self.label(core)} of kernel {self.kernel_name} waited "
                                      f"{WAIT_LIMIT_S:g} s in {what} for {self.label(missing[0])}, which is still "
                                      f"running (TORCHNEURON_EXT_NKI_CORE_WAIT_S sets the limit)", where)
            self._waits[core] = None
            values = dict(slot)
            taken = self._taken.setdefault(slot_key, set())
            taken.add(core)
            if len(taken) == len(participants):
                del self._slots[slot_key], self._taken[slot_key]
        if turn:
            self._take_turn(core)
        return values

    def _judge(self) -> None:
        """Called with the lock held whenever a core starts waiting or finishes: if no core can move again,
        the launch fails with a DeadlockError naming every core's instruction."""
        if self.stop.is_set():
            return
        waiting = [c for c in range(self.count) if self._waits[c] is not None]
        if not waiting:
            return
        for c in waiting:
            w = self._waits[c]
            slot = self._slots.get((w.key, w.generation), {})
            if all(p in slot for p in w.participants):
                return  # complete: that core is about to move
        if any(not self._done[c] and self._waits[c] is None for c in range(self.count)):
            return  # a running core may still arrive
        lines = []
        for c in range(self.count):
            w = self._waits[c]
            if w is None:
                lines.append(f"{self.label(c)} finished the kernel")
                continue
            slot = self._slots.get((w.key, w.generation), {})
            missing = [p for p in w.participants if p not in slot]
            lines.append(f"{self.label(c)} waits in {w.what} at {_where(w.where)} for "
                         f"{', '.join(map(self.label, missing))}")
        first = self._waits[waiting[0]].where
        who = "ranks" if self.cores_per_rank else "cores"
        self.error = DeadlockError.at("deadlock", f"deadlock between the {who} of kernel {self.kernel_name}: "
                                      + "; ".join(lines) + " (on the device the kernel would hang)", first)
        self.stop.set()

    def label(self, g: int) -> str:
        """How messages name thread ``g``: "core 1", or "rank 2" / "rank 2 core 1" on several ranks."""
        if self.cores_per_rank is None:
            return f"core {g}"
        rank, core = divmod(g, self.cores_per_rank)
        return f"rank {rank}" if self.cores_per_rank == 1 else f"rank {rank} core {core}"


class Headroom:
    """Whether other processes leave a CPU of this process's affinity free, judged every ``PERIOD_S`` from
    /proc/stat (busy time of those CPUs, steal included) less this process's own CPU time: a cheap measure
    that does not depend on whether the cores overlap now. Linux only; elsewhere (or if unreadable) never."""

    PERIOD_S = 0.5
    # Others may use at most this much of the CPUs beyond one for this process: a CPU three quarters free.
    FREE_NEEDED = 0.75

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self._cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        self._next = 0.0
        self._last: Optional[tuple] = None
        self._spare = mode == "1"

    @classmethod
    def from_env(cls, value: str) -> "Headroom":
        value = value.strip().lower()
        if value not in ("auto", "0", "1"):
            raise ValueError(f"{OVERLAP_ENV} must be auto, 0 or 1, got {value!r}")
        return cls(value)

    def spare(self) -> bool:
        if self.mode != "auto":
            return self._spare
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.PERIOD_S
            self._probe(now)
        return self._spare

    def _probe(self, now: float) -> None:
        times = _cpu_jiffies(self._cpus) if len(self._cpus) > 1 else None
        self.update(now, time.process_time(), times)

    def update(self, now: float, own_cpu_s: float, jiffies: Optional[tuple]) -> None:
        """A sample: monotonic time, this process's CPU time and (idle, total) ticks of its CPUs (None: not
        known). Compared with the previous sample, it decides ``spare`` until the next."""
        if jiffies is None:
            self._spare, self._last = False, None
            return
        sample = (now, own_cpu_s, *jiffies)
        last, self._last = self._last, sample
        if last is None:
            return
        wall, own = sample[0] - last[0], sample[1] - last[1]
        idle, total = sample[2] - last[2], sample[3] - last[3]
        if wall <= 0 or total <= 0:
            return
        cpus = len(self._cpus)
        others = (1.0 - idle / total) * cpus - own / wall
        self._spare = cpus > 1 and others <= cpus - 1 - self.FREE_NEEDED


def _cpu_jiffies(cpus: list) -> Optional[tuple]:
    """(idle, total) clock ticks of ``cpus`` since boot from /proc/stat (idle and iowait count as idle)."""
    try:
        with open("/proc/stat", "rb") as f:
            lines = f.read().split(b"\n")
    except OSError:
        return None
    wanted = {b"cpu%d" % c for c in cpus}
    idle = total = 0
    for line in lines:
        fields = line.split()
        if fields and fields[0] in wanted:
            ticks = [int(v) for v in fields[1:9]]
            idle += ticks[3] + ticks[4]
            total += sum(ticks)
    return (idle, total) if total else None


def _where(location: Optional[tuple]) -> str:
    if location is None:
        return "an unknown line"
    filename, lineno, func, _text = location
    return f"{os.path.basename(filename)}:{lineno}"
