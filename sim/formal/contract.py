"""The contract of a core's role, written once: :class:`CoreContract`, an observer of a core's ports
whose ``Assert`` statements hold on every build of the core registry.

One decoder contract and one encoder contract (the same class, ``role=``), in the style of
``amaranth.lib``'s FIFO contract: it reads the core's ports and nothing inside, so it runs unchanged

- formally, inside a harness that makes the environment free (``sim/formal/properties.py``: the
  ``stream_rules``, ``out_of_reset`` and ``progress`` harnesses assert their clauses through it), and
- in simulation, around the very core a simulation job runs (:class:`~ansforge.sim.amaranth_sim.AmaranthEngine`
  elaborates it beside every registered core; Amaranth's simulator raises ``AssertionError`` with the
  clause's message in the clock a clause fails).

Clauses (:data:`CLAUSES`; a harness may check a subset, for the solver's sake):

``stream_rules``
    On every output stream: ``valid`` is not retracted before the transfer, and the payload holds while
    ``valid & ~ready``.
``out_of_reset``
    The clock after a reset holds no output ``valid`` and no ``done``; from power-on nothing comes out
    and no ``done`` comes until a command has been accepted.
``commands`` (formally bounded on every build, with saturated counts: below)
    ``done`` is one clock per accepted command, in order, never without a command in flight; the pairs
    (decoder: leaving ``o``; encoder: entering ``i``) are the commands' ``count``, each command's before
    its ``done`` (a decoder may end a command early only with an error status); a decoder reads exactly
    each command's ``words`` from ``i`` before its ``done``; an encoder ends each command's words with
    one word marked ``last``, before its ``done`` (an empty one-state rANS stream has no word at all).
    A reset forgets every command in flight.
``progress``
    While every command, word and pair input is offered, no table write is, and every output is taken,
    something moves within ``progress_clocks`` clocks.

What the contract cannot say from the ports alone is the golden model's: which pairs and which words
(the simulation jobs' bit-exact checks and the formal round trips and lemma chains).

Widths. The ledger of commands in flight is a ring of :attr:`CoreContract.depth` commands (more in
flight is itself a violation of ``commands``); counts are as wide as the core's ``cmd.count``, or, for a
bounded proof, saturated at :attr:`CoreContract.count_cap` (below).

Saturated counts. A run of ``n`` clocks moves at most ``n`` pairs and ``n`` words, so a command whose count
is at least ``count_cap > n`` is not filled within the run whatever its exact count: the ledger may hold
``min(count, count_cap)`` in ``bits_for(count_cap)`` bits and give the same verdicts. The contract then
assumes fewer than ``count_cap`` moves on each port since power-on, which no run of fewer clocks can
break: the narrow ledger is exact for every trace a run of that length has, and a longer run would
only be cut short, never pass a violation. The core's own counters stay at full width.
"""

from __future__ import annotations

from amaranth.hdl import Array, Assert, Assume, Cat, Const, Elaboratable, Module, Mux, ResetSignal, Signal, Value
from amaranth.utils import bits_for
from amaranth.lib.wiring import In

from ...hdl.common import DecodeStatus

__all__ = ["CLAUSES", "CoreContract", "role_of", "progress_bound", "streams_of", "transfer_of"]

#: Every clause of the contract, in the order the docstring states them.
CLAUSES = ("stream_rules", "out_of_reset", "commands", "progress")


def role_of(core) -> str | None:
    """``"decoder"``/``"encoder"`` if ``core`` is a core of the registry (``hdl/cores.py``), else ``None``."""
    from ...hdl.cores import REGISTRY

    for row in REGISTRY:
        if row.base == row.name and isinstance(core, row.core_class):
            return row.role
    return None


def progress_bound(core) -> int:
    """The longest run of clocks without a transfer the ``progress`` clause allows ``core`` (a registered
    core of ``N`` states). Measured, each where its worst case is: the formal harnesses on the small
    builds (``hdl/cores.py`` ``FormalConfig.progress_clocks``, ``docs/formal.md``) and the simulation
    runs on the shipped ones (commands of 0, 1, 3, 16 and 37 pairs, and resumed blocks):

    - tANS encoder, one-state rANS encoder: 6;
    - tANS decoder: ``6 + N`` for ``N > 1``: a command resumed at a checkpoint takes its ``N`` lane states
      from the command and turns to the block's first lane (17 clocks without a transfer at ``N = 16``,
      9 at ``N = 8``: ``tests/hdl/test_tans_xn.py``'s resumed blocks); a short command's head reads ``N``
      states, two per 16-bit word at ``R = 8`` (8 clocks at ``N = 16``);
    - one-state rANS decoder: ``max_symbols + 4`` (its symbol search steps up to ``max_symbols - 1`` clocks);
    - interleaved rANS encoder: ``N`` (a command shorter than ``N`` pairs enters ghosts; 15 at ``N = 16``);
    - interleaved rANS decoder: ``2 N + 2`` (a command of no pairs, its ghosts and end checks).
    """
    from ...hdl.rans.cores import RansDecoder, RansEncoder

    states = getattr(getattr(core, "codec", None), "states", 1) or 1
    if isinstance(core, RansDecoder):
        return 2 * states + 2 if states > 1 else core.max_symbols + 4
    if isinstance(core, RansEncoder):
        return states if states > 1 else 6
    return 6 + states if role_of(core) == "decoder" and states > 1 else 6


def streams_of(core):
    """The core's input and output stream ports: ``([(name, port)], [(name, port)])``."""
    ins, outs = [], []
    for name, member in core.signature.members.items():
        if member.is_signature:
            (ins if member.flow == In else outs).append((name, getattr(core, name)))
    return ins, outs


def transfer_of(port) -> Value:
    """A transfer on the stream ``port`` in this clock."""
    return port.valid & port.ready


class _Ledger:
    """The commands in flight as a ring of ``depth`` amounts (pairs or words), each filled by the moves
    attributed to it in order, and retired by ``done``."""

    def __init__(self, m: Module, name: str, depth: int, width: int):
        self.m, self.depth = m, depth
        self.amount = Array(Signal(width, name=f"{name}_amount_{j}", reset_less=True) for j in range(depth))
        self.fill = Signal(width, name=f"{name}_fill", reset_less=True)
        self.head = Signal(range(depth), name=f"{name}_filling", reset_less=True)   # the command being filled
        self.name = name

    def _next(self, index) -> Value:
        return (index + 1)[:len(self.head)]

    def run(self, reset, push, amount, tail, done_at, move, *, end_early=None) -> tuple[Value, Value]:
        """Attribute ``move`` (one amount per clock) to the oldest unfilled command; at ``done`` of the
        command ``done_at``, return whether it was filled. ``end_early``: a ``done`` that may come before
        the command is filled (a decoder's error), which then skips the rest of it. Returns
        ``(overflow, filled_at_done)``: a move with no command to take it, and the filled test."""
        m = self.m
        head, fill = self.head, self.fill
        with m.If(push):
            m.d.sync += self.amount[tail].eq(amount)

        # The ring as it is in this clock: a command accepted now is in it (a core may take its first
        # word or pair with it).
        def amount_of(j):
            return Mux(push & (j == tail), amount, self.amount[j])

        def holds(j):                 # ``j`` is ``head`` or the command after it
            return (j != tail) | push

        # Skip a command whose amount is already reached (a zero count) before taking a move.
        head_held = holds(head)
        skip = (fill == amount_of(head)) & head_held
        target = Mux(skip, self._next(head), head)
        target_held = Mux(skip, (head != tail) & holds(target), head_held)
        base = Mux(skip, 0, fill)
        open_ = target_held & (base != amount_of(target))
        overflow = move & ~open_
        new_fill = Mux(move, base + 1, base)[:len(fill)]
        new_head = target
        if end_early is not None:
            # ``done`` of the command being filled, unfilled: an early end moves on past it.
            early = end_early & (target == done_at) & target_held
            new_head = Mux(early, self._next(done_at), target)
            new_fill = Mux(early, 0, new_fill)
        filled = (done_at != new_head) | (new_fill == amount_of(done_at))
        with m.If(reset):
            m.d.sync += [head.eq(0), fill.eq(0)]
        with m.Else():
            m.d.sync += [head.eq(new_head), fill.eq(new_fill)]
        return overflow, filled


class CoreContract(Elaboratable):
    """The port contract of ``core`` (a decoder or an encoder of the core registry), as ``Assert``
    statements of the clauses in ``clauses`` (:data:`CLAUSES`; default all).

    ``core`` is elaborated elsewhere (a harness's or a simulation's top holds both). ``rst`` is the
    reset the core sees (default the ``sync`` domain's; a wrapper that adds one passes it). The
    observer's registers are reset-less, in the ``sync`` domain: they see every reset and survive it.

    Parameters
    ----------
    role : "decoder" | "encoder"
        Default: :func:`role_of`.
    progress_clocks : int
        The ``progress`` bound (default :func:`progress_bound`).
    sampled : bool
        Assertions in the ``sync`` domain, checked at the clock edge (simulation: a testbench's writes
        within a clock are no state of the design), instead of in every step (formal).
    depth : int
        The ``commands`` ledger's ring: at most ``depth - 2`` commands in flight besides one whose ``done``
        comes in this clock (a power of two; the cores' shells hold two or three: one running, one taken
        while it ends, and a decoder's report waiting).
    count_cap : int or None
        For a bounded proof of fewer than ``count_cap`` clocks (``2**k - 1``): the ledger holds counts and
        words saturated at it, and the contract assumes fewer than ``count_cap`` pairs and words moved
        (the module docstring's "Saturated counts"). ``None``: full width (simulation, unbounded runs).
    latch : callable or None
        A formal harness's latched check (``latch(enable, test, message)``, :meth:`~.benches.Bench.check`),
        through which the ``commands`` clause asserts, so that a counterexample's report names the
        clock and the clause that failed (the ``sat`` runner reads both from latched checks).
    """

    def __init__(self, core, *, role: str | None = None, clauses=CLAUSES, rst=None, progress_clocks: int | None = None,
                 depth: int = 8, sampled: bool = False, count_cap: int | None = None, latch=None):
        self._MustUse__silence = True           # a refused contract is no unused elaboratable
        role = role or role_of(core)
        if role not in ("decoder", "encoder"):
            raise ValueError(f"role must be decoder or encoder, not {role!r}")
        unknown = set(clauses) - set(CLAUSES)
        if unknown:
            raise ValueError(f"clauses must be among {', '.join(CLAUSES)}, not {sorted(unknown)}")
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth must be a power of two of at least 2, not {depth!r}")
        if count_cap is not None and (count_cap < 2 or count_cap & (count_cap + 1)):
            raise ValueError(f"count_cap must be 2**k - 1 of at least 3, not {count_cap!r}")
        self._MustUse__silence = False
        self.core, self.role, self.clauses, self.rst, self.depth = core, role, tuple(clauses), rst, depth
        self.sampled, self.count_cap, self.latch = sampled, count_cap, latch
        self.progress_clocks = progress_bound(core) if progress_clocks is None else progress_clocks
        #: ``(test, what)`` of each ``Cover`` the clauses state (after :meth:`build`): a harness latches
        #: them, to show that its environment reaches what the clauses speak of.
        self.covers: list[tuple[Value, str]] = []
        self._module = None

    def _check(self, m: Module, test, message: str, *, latched: bool = False) -> None:
        # Sampled at the clock edge in simulation (a testbench's writes within a clock are no state
        # of the design); every step of the trace formally (the same values: the settled clock).
        # ``latched``: a check at the module's top level, which a harness's ``latch`` may take.
        if latched and self.latch is not None:
            self.latch(1, test, message)
            return
        domain = m.d.sync if self.sampled else m.d.comb
        domain += Assert(test, message, src_loc_at=1)

    def elaborate(self, platform):
        return self.build()

    def build(self) -> Module:
        """The contract's module (built once; :attr:`covers` is filled then), what :meth:`elaborate` gives."""
        if self._module is not None:
            return self._module
        self._module = m = Module()
        core = self.core
        rst = ResetSignal("sync") if self.rst is None else self.rst
        ins, outs = streams_of(core)

        def past(value, name):
            v = Value.cast(value)
            r = Signal(len(v), name=f"past_{name}", reset_less=True)
            m.d.sync += r.eq(v)
            return r

        started = Signal(name="started", reset_less=True)            # low in the first clock only
        m.d.sync += started.eq(1)
        p_rst = past(rst, "rst")

        if "stream_rules" in self.clauses:
            for name, port in outs:
                held = past(port.valid & ~port.ready, f"{name}_held")
                p_payload = past(port.p, f"{name}_payload")
                with m.If(started & held & ~p_rst):
                    self._check(m, port.valid, f"{name}.valid retracted before the transfer")
                    self._check(m, Value.cast(port.p) == p_payload, f"{name}.payload changed while valid & ~ready")
                self.covers.append((started & held & ~p_rst & transfer_of(port), f"{name}: held under back-pressure, then taken"))

        if "out_of_reset" in self.clauses:
            with m.If(p_rst):
                for name, port in outs:
                    self._check(m, ~port.valid, f"{name}.valid in the clock after a reset")
                self._check(m, ~core.done, "done in the clock after a reset")
            quiet = Signal(init=1, name="quiet", reset_less=True)   # nothing commanded since power-on
            m.d.sync += quiet.eq(quiet & ~transfer_of(core.cmd))
            with m.If(quiet):
                for name, port in outs:
                    self._check(m, ~port.valid, f"{name}.valid before the first command")
                self._check(m, ~core.done, "done before the first command")
            after_reset = Signal(name="reset_seen", reset_less=True)
            m.d.sync += after_reset.eq(after_reset | (rst & ~quiet))
            for name, port in outs:
                self.covers.append((after_reset & ~rst & transfer_of(port), f"{name}: a transfer after a command and a reset"))

        if "commands" in self.clauses:
            self._commands(m, rst)

        if "progress" in self.clauses:
            offered = [port.valid for name, port in ins if "cfg" not in name]
            no_writes = [~port.valid for name, port in ins if "cfg" in name]
            taken = [port.ready for _, port in outs]
            eager = Cat(*offered, *no_writes, *taken).all()
            moved = Cat(*(transfer_of(p) for _, p in ins + outs)).any()
            wait = Signal(8, name="clocks_without_transfer", reset_less=True)
            m.d.sync += wait.eq(Mux(eager & ~moved & ~rst, Mux(wait == 255, 255, wait + 1), 0))
            self._check(m, wait < self.progress_clocks, "no transfer for too long with inputs offered, outputs taken")
            p_eager = past(eager, "eager")
            for name, port in outs:
                self.covers.append((eager & p_eager & transfer_of(port), f"{name}: a transfer with inputs offered, outputs taken"))
        return m

    def _amount_bits(self, width: int) -> int:
        return width if self.count_cap is None else min(width, bits_for(self.count_cap))

    def _capped(self, amount) -> Value:
        """``amount``, saturated at :attr:`count_cap` where there is one."""
        if self.count_cap is None:
            return amount
        return Mux(amount >= self.count_cap, self.count_cap, amount)

    def _bound_moves(self, m: Module, name: str, move) -> None:
        """With a :attr:`count_cap`: fewer than ``count_cap`` ``move`` clocks assumed since power-on, this
        clock's included (never binding in a run of fewer clocks, which is what makes the saturated
        ledger exact). Without one, nothing."""
        if self.count_cap is None:
            return
        moved = Signal(range(self.count_cap), name=f"{name}_moved", reset_less=True)
        # This clock's move counted too: a ledger slot then never reaches the cap it saturates at.
        m.d.comb += Assume(moved + move < self.count_cap)
        m.d.sync += moved.eq(moved + move)

    def _commands(self, m: Module, rst) -> None:
        core, depth = self.core, self.depth
        decoder = self.role == "decoder"
        cmd = core.cmd
        width = len(cmd.p.count)
        accepted = transfer_of(cmd) & ~rst
        # The ring of commands in flight: ``tail`` is the next free slot, ``oldest`` the next to end.
        tail = Signal(range(depth), name="cmd_tail", reset_less=True)
        oldest = Signal(range(depth), name="cmd_oldest", reset_less=True)
        in_flight = Signal(range(depth + 1), name="cmd_in_flight", reset_less=True)
        done = core.done & ~rst
        self._check(m, ~done | (in_flight != 0), "done with no command in flight", latched=True)
        # (Counted before this clock's ``done`` retires one: the ring then never wraps onto its oldest.)
        self._check(m, in_flight + accepted <= depth - 1, f"more than {depth - 2} commands in flight besides one ending",
                    latched=True)
        with m.If(rst):
            m.d.sync += [tail.eq(0), oldest.eq(0), in_flight.eq(0)]
        with m.Else():
            m.d.sync += [tail.eq(Mux(accepted, (tail + 1)[:len(tail)], tail)),
                         oldest.eq(Mux(done, (oldest + 1)[:len(oldest)], oldest)),
                         in_flight.eq(in_flight + accepted - done)]

        pairs = core.o if decoder else core.i
        ok = (core.status == DecodeStatus.OK) if decoder else Const(1)
        ledger = _Ledger(m, "pairs", depth, self._amount_bits(width))
        pair_moves = transfer_of(pairs) & ~rst
        self._bound_moves(m, "pairs", pair_moves)
        over, filled = ledger.run(rst, accepted, self._capped(cmd.p.count), tail, oldest, pair_moves,
                                  end_early=(done & ~ok) if decoder else None)
        self._check(m, ~over, "a pair beyond the commands' counts", latched=True)
        self._check(m, ~done | ~ok | filled, "done (OK) before the command's count of pairs", latched=True)

        if decoder:
            # ``words`` counts stream words; a port of two stream words takes them two by two.
            per_port = max(1, len(core.i.p.data) // core.codec.word_bits)
            port_words = cmd.p.words if per_port == 1 else (cmd.p.words + per_port - 1) // per_port
            words = _Ledger(m, "words", depth, self._amount_bits(len(cmd.p.words)))
            word_moves = transfer_of(core.i) & ~rst
            self._bound_moves(m, "words", word_moves)
            over_w, filled_w = words.run(rst, accepted, self._capped(port_words), tail, oldest, word_moves)
            self._check(m, ~over_w, "a word beyond the commands' words", latched=True)
            self._check(m, ~done | filled_w, "done before the command's words were read", latched=True)
        else:
            # A command's words end with one word marked ``last``, before its ``done``. A stream may be
            # empty (the solver found a one-pair command of the one-state rANS encoder that writes no
            # word: docs/formal.md), so a command may end with no word, never with words and no ``last``.
            lasts = Signal(range(depth + 1), name="lasts_unreported", reset_less=True)
            unended = Signal(name="words_unended", reset_less=True)     # words out since the last ``last``
            word = transfer_of(core.o) & ~rst
            last = word & core.o.p.last
            self._check(m, ~last | (lasts < in_flight), "a word marked last beyond the commands in flight", latched=True)
            self._check(m, ~done | ~unended | last, "done with the command's words not ended by a last word", latched=True)
            with m.If(rst):
                m.d.sync += [lasts.eq(0), unended.eq(0)]
            with m.Else():
                m.d.sync += [lasts.eq(lasts + last - (done & ((lasts != 0) | last))),
                             unended.eq((unended | word) & ~last)]
        self.covers.append((done & (in_flight == 2), "done with the next command in flight"))
