"""The host side of a board: the protocol over a serial port, a container's blocks through the board, and
the same board top simulated in Verilator behind a pseudo-terminal.

* :class:`BoardLink` speaks ``docs/board.md``'s protocol over anything with ``read``/``write``
  (pyserial's ``Serial`` on a real port or on the simulated board's pseudo-terminal) and reads the
  board's description (:class:`BoardInfo`): from it the host rebuilds the very subsystem the board holds,
  so that it lays out memory exactly as the board reads it.
* :func:`board_run` takes a container's blocks (:func:`~.container_plan.container_blocks`), deals them into
  STARTs of at most one block a lane that fit the board's memory, uploads and runs each, and compares
  every lane's count and CRC-32 with the software decode of its block (:class:`BlockResult`).
* :class:`SimulatedBoard` compiles :class:`~ansforge.hdl.board.BoardCore` (the bitstream's top without
  its PLL: the design clock is the simulation's) with a harness that bridges the UART pins to a
  pseudo-terminal, bit by bit, at the build's divisor; the same host code then drives it.
"""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import struct
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..hdl.board import BOARD_ID, BOARD_VERSION, BoardCore, BoardReg, Command, Reply
from ..hdl.common import DecodeStatus
from ..hdl.subsystem import AxiDecompressor, Csr
from ..model import progress
from ..model.cache import cache_root
from ..model.coding.codecs import parse_codec
from ..model.errors import AnsforgeError, ConfigError, ToolError
from .formal.benches import unused_ok
from .container_plan import container_blocks, container_lanes
from .subsystem import LaneBlock, lanes_program

__all__ = ["BoardError", "BoardLink", "BoardInfo", "BlockResult", "board_run", "board_starts", "run_start",
           "board_core", "SimulatedBoard",
           "simulated_board"]


class BoardError(AnsforgeError):
    """The board answered what the protocol does not allow, or not at all."""


@dataclass(frozen=True)
class BoardInfo:
    """What a board says of itself (its registers): the subsystem's parameters, the memory, the clock."""

    clock_hz: int
    memory_beats: int
    divisor: int
    codec: str
    params: int
    records: int
    limits: int
    build: int

    @property
    def lanes(self) -> int:
        return self.params & 0xFF

    @property
    def bus_bits(self) -> int:
        return (self.params >> 8 & 0xFF) * (self.params >> 16 & 0xFF)

    @property
    def target(self) -> str:
        return "fp32" if self.params >> 25 & 1 else "bf16"

    def decompressor(self) -> AxiDecompressor:
        """The subsystem the board holds, rebuilt here: what the host lays memory out for. ``BoardError``
        if what it rebuilds reads other registers than the board's (another ansforge built the board)."""
        b = self.build
        spec = parse_codec(self.codec)
        word_bits = self.params >> 8 & 0xFF
        dut = AxiDecompressor(spec, lanes=self.lanes, target=self.target, bus_bits=word_bits * (self.params >> 16 & 0xFF),
                              max_codes=b & 0x1FF, max_symbols=b >> 9 & 0x1FF, escape_bits=b >> 18 & 0xF,
                              count_bits=b >> 22 & 0x3F, table_sets=1 << (self.params >> 26 & 7),
                              row_shifts=bool(b >> 28 & 1), resumable=bool(self.records >> 22 & 1))
        _layout_only(dut)
        if (dut.params_word(), dut.records_word(), dut.count_bits) != (self.params, self.records, self.limits & 0x3F):
            raise BoardError(f"the board's subsystem (PARAMS {self.params:#010x}, RECORDS {self.records:#010x}) is not "
                             f"the one this ansforge builds for its description ({dut.params_word():#010x}, "
                             f"{dut.records_word():#010x}): rebuild the bitstream with this version")
        return dut


class BoardLink:
    """The protocol of ``docs/board.md`` over ``port`` (an open pyserial ``Serial``, or any object with
    ``read(n)`` and ``write(b)`` whose ``read`` returns fewer bytes on a timeout).

    Every command waits for its reply, up to the port's timeout (and ``seconds_per_byte`` for each byte of a
    ``WRITE_MEM`` that the port may still hold); a missing or short reply is a :class:`BoardError` naming the
    command."""

    def __init__(self, port, *, name: str = "board", seconds_per_byte: float = 1e-4):
        self.port, self.name, self.seconds_per_byte = port, name, seconds_per_byte

    def _reply(self, n: int, what: str) -> bytes:
        got = b""
        while len(got) < n:
            more = self.port.read(n - len(got))
            if not more:
                raise BoardError(f"{self.name}: no reply to {what} (got {len(got)} of {n} bytes); is the bitstream "
                                 "loaded and the port right?")
            got += more
        return got

    def write_reg(self, addr: int, value: int) -> None:
        self.port.write(struct.pack("<BHI", Command.WRITE_REG, addr, value & 0xFFFF_FFFF))
        resp = self._reply(1, f"a write of register {addr:#06x}")[0]
        if resp != Reply.OK:
            raise BoardError(f"{self.name}: the write of {value:#x} to register {addr:#06x} was refused "
                             f"({_reply_name(resp)})")

    def read_reg(self, addr: int) -> int:
        self.port.write(struct.pack("<BH", Command.READ_REG, addr))
        value, resp = struct.unpack("<IB", self._reply(5, f"a read of register {addr:#06x}"))
        if resp != Reply.OK:
            raise BoardError(f"{self.name}: the read of register {addr:#06x} was refused ({_reply_name(resp)})")
        return value

    def write_memory(self, beat: int, data: bytes, beat_bytes: int) -> None:
        """Write ``data`` (whole beats of ``beat_bytes``) from beat ``beat`` on."""
        if len(data) % beat_bytes:
            raise ValueError(f"{len(data)} bytes is not a whole number of {beat_bytes}-byte beats")
        beats = len(data) // beat_bytes
        self.port.write(struct.pack("<BII", Command.WRITE_MEM, beat, beats))
        self.port.write(data)
        # the board may still be taking the last of the bytes the port buffered
        timeout = getattr(self.port, "timeout", None)
        if timeout is not None:
            self.port.timeout = timeout + len(data) * self.seconds_per_byte
        try:
            resp = self._reply(1, f"a write of {beats} beats to memory")[0]
        finally:
            if timeout is not None:
                self.port.timeout = timeout
        if resp != Reply.OK:
            raise BoardError(f"{self.name}: the write of beats {beat}..{beat + beats - 1} was refused "
                             f"({_reply_name(resp)})")

    def info(self) -> BoardInfo:
        """The board's description; ``BoardError`` if it is not an ansforge board of this protocol."""
        ident = self.read_reg(BoardReg.ID)
        if ident != BOARD_ID:
            raise BoardError(f"{self.name}: register {BoardReg.ID:#06x} reads {ident:#010x}, not an ansforge board "
                             f"({BOARD_ID:#010x})")
        version = self.read_reg(BoardReg.VERSION)
        if version != BOARD_VERSION:
            raise BoardError(f"{self.name}: the board speaks protocol version {version}; this host speaks "
                             f"{BOARD_VERSION}: rebuild the bitstream with this version")
        name = b"".join(self.read_reg(BoardReg.CODEC + 4 * i).to_bytes(4, "little") for i in range(8))
        return BoardInfo(self.read_reg(BoardReg.CLOCK_HZ), self.read_reg(BoardReg.MEMORY_BEATS),
                         self.read_reg(BoardReg.UART_DIVISOR), name.rstrip(b"\0").decode("ascii", "replace"),
                         self.read_reg(Csr.PARAMS), self.read_reg(Csr.RECORDS), self.read_reg(Csr.LIMITS),
                         self.read_reg(BoardReg.BUILD))


def _layout_only(dut: AxiDecompressor) -> None:
    """``dut`` is the host's copy of the board's subsystem, for its memory layout: never elaborated here."""
    unused_ok(dut, dut.parallel)


def _reply_name(resp: int) -> str:
    try:
        return Reply(resp).name
    except ValueError:
        return f"reply {resp:#04x}"


@dataclass
class BlockResult:
    """One block through the board: where it came from, what the board gave and what the software gives."""

    start: int
    lane: int
    tensor: str
    block: int | str         #: the block's index in its tensor ("3 part 1": a part of block 3)
    pairs: int
    cycles: int              #: clocks from the START to the block's last weight (its table load included)
    count: int
    crc: int
    expected_crc: int
    status: str              #: the START's DecodeStatus (or BUS_ERROR)

    @property
    def ok(self) -> bool:
        return self.count == self.pairs and self.crc == self.expected_crc and self.status == "OK"

    def pairs_per_clock(self) -> float:
        return self.pairs / self.cycles if self.cycles else 0.0


def block_parts(container, dut: AxiDecompressor, blk: LaneBlock, pairs: int) -> list[LaneBlock]:
    """``blk`` (a version-6 container's block of one table) cut into parts of at most ``pairs`` pairs at
    checkpoints, each a record that resumes the lane's decoder there: the block's pairs coded again by the
    golden encoder with a checkpoint every ``pairs`` pairs (its words are the container's, checked), then cut
    as the container cuts a stream at its checkpoints (:func:`~.jobs.stream_blocks`). The parts decode
    independently, on any lanes."""
    from ..model.coding import fastans
    from ..model.coding.stream import Run
    from .jobs import command_state, stream_blocks

    if blk.origin is None:
        raise ConfigError(f"block of {blk.count:,} pairs: only a container's own blocks are cut into parts")
    st = next(x for x in container.streams if x.index == blk.origin[0])
    lo, hi = st.tensor_tables[blk.tensor]
    if hi - lo != 1 or (blk.runs and any(r[0] or r[1] for r in blk.runs)):
        raise ConfigError(f"tensor {container.tensors[blk.tensor]['name']!r}, block {blk.origin[1]}: a block coded "
                          "with several tables is not cut into parts")
    span = st.spans[blk.origin[1]]
    symbols, extras = container.decode_stream(st, span.pair, span.count)
    coded = fastans.encode(st.spec, [st.tables[lo]], [Run(0, span.count)], symbols, extras, pairs)
    words = np.asarray(coded.words, dtype=np.uint64)
    if not np.array_equal(words, np.asarray(blk.words, dtype=np.uint64)):
        raise ConfigError(f"tensor {container.tensors[blk.tensor]['name']!r}, block {blk.origin[1]}: coded again, its "
                          "words differ from the container's")
    proto = dut.decoder_prototype
    out = []
    for sb in stream_blocks(words, list(coded.checkpoints), span.count, word_bits=st.spec.word_bits):
        cp = sb.resume
        part = {"resume": int(cp is not None), "partial": int(not sb.last), "bit": cp.bit if cp else 0,
                "state": command_state(proto, cp)}
        out.append(LaneBlock(sb.words[::-1], sb.count, blk.entries, None,
                             np.asarray(blk.bits)[sb.first_pair:sb.first_pair + sb.count], blk.tensor, part=part,
                             origin=blk.origin))
    return out


def board_starts(dut: AxiDecompressor, blocks: list[tuple[str, int, LaneBlock]], memory_beats: int):
    """Deal ``blocks`` (``(tensor, index, block)``, container order) into STARTs of at most one block a lane
    whose memory images fit ``memory_beats``: ``(program, [(lane, tensor, index, block)])`` each. A block
    whose record alone is larger than the memory is refused in one line (``ConfigError``)."""
    starts: list = []

    def program_of(items):
        return lanes_program(dut, [[b] for _, _, b in items], f"START {len(starts)}")

    batch: list[tuple[str, int, LaneBlock]] = []
    made = None
    for item in blocks:
        if len(batch) < dut.lanes:
            trial = program_of(batch + [item])
            if len(trial.beats) <= memory_beats:
                batch, made = batch + [item], trial
                continue
        if batch:
            starts.append((made, [(lane, t, i, b) for lane, (t, i, b) in enumerate(batch)]))
        trial = program_of([item])
        if len(trial.beats) > memory_beats:
            kib = len(trial.beats) * dut.bus_bits / 8 / 1024
            raise ConfigError(f"tensor {item[0]!r}, block {item[1]}: its record is {len(trial.beats):,} beats "
                              f"({kib:,.0f} KiB); the board's memory holds {memory_beats:,} beats "
                              f"({memory_beats * dut.bus_bits // 8 // 1024:,} KiB)")
        batch, made = [item], trial
    if batch:
        starts.append((made, [(lane, t, i, b) for lane, (t, i, b) in enumerate(batch)]))
    return starts


def _status_name(status: int) -> str:
    if status >> 8 & 1:
        return "BUS_ERROR"
    code = status >> 4 & 7
    try:
        return DecodeStatus(code).name
    except ValueError:
        return f"status {code}"


def board_run(link: BoardLink, container, *, names: list[str] | None = None, timeout_s: float = 60.0,
              on_block=None, on_start=None) -> tuple[BoardInfo, list[BlockResult]]:
    """Every coded tensor of ``container`` (``names``: these only) through the board behind ``link``.

    Each START: its memory image uploaded, the lane registers written, ``CONTROL`` = 1, ``STATUS`` polled
    until ``DONE`` (``timeout_s`` wall seconds at most), then each lane's count, CRC-32 and last clock read
    and compared with its block's software decode (the container's own decoder's weights, as ``ansforge
    decompress`` writes them). ``on_block(result)`` is called for each block as it is checked, and
    ``on_start(results)`` with a START's blocks once they all are."""
    known = {r["name"] for r in container.tensors}
    for name in names or ():
        if name not in known:
            raise ConfigError(f"{container.path}: no tensor named {name!r}")
    info = link.info()
    dut = info.decompressor()
    need = container_lanes(container, names)
    if need is None:
        raise ConfigError(f"{container.path}: no coded tensor{' of ' + ', '.join(names) if names else ''} to run")
    need.check(dut, f"{container.path} on the board")
    tensor_names = [r["name"] for r in container.tensors]
    seen: dict[int, int] = {}
    blocks = []
    # a block's share of the memory: the lanes decode a START's records at once, one a lane
    share = info.memory_beats // dut.lanes
    for blk in container_blocks(container, dut, need):
        k = seen[blk.tensor] = seen.get(blk.tensor, -1) + 1
        beats = len(lanes_program(dut, [[blk]]).beats)
        if beats > share and dut.parallel.resumable:
            par = dut.parallel
            overhead = (par.header_units + par.entry_units * len(blk.entries or [])) / par.units_per_beat + 2
            pairs = int((share - overhead) / (beats - overhead) * blk.count * 0.97)
            if pairs > 0:       # parts of equal size, each within the share
                n = -(-blk.count // pairs)
                pairs = -(-blk.count // n)
            try:
                parts = block_parts(container, dut, blk, max(1024, pairs)) if pairs > 0 else [blk]
            except ConfigError:
                if beats > info.memory_beats:
                    raise
                parts = [blk]          # it fits whole: one lane decodes it
            blocks += [(tensor_names[blk.tensor], f"{k} part {j}" if len(parts) > 1 else k, p)
                       for j, p in enumerate(parts)]
        else:
            blocks.append((tensor_names[blk.tensor], k, blk))
    results = []
    for s, (program, items) in enumerate(board_starts(dut, blocks, info.memory_beats)):
        done = run_start(link, dut, s, program, items, timeout_s=timeout_s)
        for r in done:
            results.append(r)
            if on_block:
                on_block(r)
        if on_start:
            on_start(done)
    return info, results


def run_start(link: BoardLink, dut: AxiDecompressor, index: int, program, items, *, timeout_s: float = 60.0
              ) -> list[BlockResult]:
    """One START of :func:`board_starts` on the board: upload, run, read back and compare each lane's block."""
    link.write_memory(0, np.ascontiguousarray(program.beats, dtype="<u8").tobytes(), dut.bus_bits // 8)
    for addr, value in program.writes:
        link.write_reg(addr, value)
    link.write_reg(Csr.CONTROL, 1)
    t0 = time.monotonic()
    while True:
        status = link.read_reg(Csr.STATUS)
        if status & 2:
            break
        if time.monotonic() - t0 > timeout_s:
            raise BoardError(f"{link.name}: START {index} ({', '.join(f'{t} block {i}' for _, t, i, _ in items)}) "
                             f"not done after {timeout_s:.0f} s (STATUS {status:#x})")
    verdict = _status_name(status)
    dtype = "<u2" if dut.target == "bf16" else "<u4"
    out = []
    for lane, tensor, block, blk in items:
        base = BoardReg.LANE0 + 16 * lane
        count, crc, last = (link.read_reg(base + 4 * k) for k in range(3))
        expected = zlib.crc32(np.asarray(blk.bits).astype(dtype).tobytes())
        out.append(BlockResult(index, lane, tensor, block, blk.count, last, count, crc, expected, verdict))
    return out


_HARNESS = r"""
// The board's UART pins bridged to a pseudo-terminal, bit by bit at the build's divisor.
#include "Vtop.h"
#include "verilated.h"
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <deque>

int main(int argc, char** argv) {
    Verilated::commandArgs(argc, argv);
    const int div = atoi(argv[1]);
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) || unlockpt(master)) { perror("pty"); return 1; }
    const char* slave_name = ptsname(master);
    // hold the slave open, raw, so that the line discipline passes every byte and a host closing it
    // does not hang up the master
    int slave = open(slave_name, O_RDWR | O_NOCTTY);
    struct termios tio;
    tcgetattr(slave, &tio);
    cfmakeraw(&tio);
    tcsetattr(slave, TCSANOW, &tio);
    fcntl(master, F_SETFL, O_NONBLOCK);
    printf("%s\n", slave_name);
    fflush(stdout);

    Vtop* top = new Vtop;
    top->clk = 0; top->rst = 1; top->uart_rx = 1;
    for (int i = 0; i < 8; i++) { top->clk = !top->clk; top->eval(); }
    top->rst = 0;
    std::deque<unsigned char> to_board;
    long rx_bit = -1, rx_timer = 0; int rx_byte = 0;       // host -> board: the bit being sent
    int tx_phase = -1; long tx_timer = 0; int tx_byte = 0; // board -> host: the bit being sampled
    long quiet = 0;
    unsigned char buf[4096];
    for (unsigned long cycle = 0;; cycle++) {
        // Between commands, with nothing in flight, wait for the host instead of spinning.
        bool idle = to_board.empty() && rx_bit < 0 && tx_phase < 0 && !(top->leds & 1);
        if ((cycle & 1023) == 0 || (idle && quiet > 4 * div * 10)) {
            struct pollfd fds[2] = {{master, POLLIN, 0}, {0, POLLIN, 0}};
            int wait = idle && quiet > 4 * div * 10 ? 50 : 0;
            if (poll(fds, 2, wait) > 0) {
                if (fds[1].revents) break;                 // the parent closed our stdin: done
                // take more only as the UART drains it: the host's write blocks meanwhile, as on a real port
                if ((fds[0].revents & POLLIN) && to_board.size() < sizeof buf) {
                    ssize_t n = read(master, buf, sizeof buf);
                    for (ssize_t i = 0; i < n; i++) to_board.push_back(buf[i]);
                }
            }
        }
        // drive uart_rx
        if (rx_bit < 0 && !to_board.empty()) { rx_byte = to_board.front(); to_board.pop_front(); rx_bit = 0; rx_timer = div; }
        if (rx_bit >= 0) {
            top->uart_rx = rx_bit == 0 ? 0 : rx_bit <= 8 ? (rx_byte >> (rx_bit - 1)) & 1 : 1;
            if (--rx_timer == 0) { rx_timer = div; if (++rx_bit == 10) rx_bit = -1; }
        } else top->uart_rx = 1;
        top->clk = 1; top->eval();
        top->clk = 0; top->eval();
        quiet = (to_board.empty() && rx_bit < 0 && tx_phase < 0) ? quiet + 1 : 0;
        // sample uart_tx in the middle of each bit
        if (tx_phase < 0) {
            if (!top->uart_tx) { tx_phase = 0; tx_timer = div / 2; tx_byte = 0; }
        } else if (--tx_timer == 0) {
            tx_timer = div;
            if (tx_phase >= 1 && tx_phase <= 8) tx_byte |= (top->uart_tx & 1) << (tx_phase - 1);
            if (tx_phase == 9) {
                unsigned char c = tx_byte;
                while (write(master, &c, 1) != 1) usleep(100);
                tx_phase = -1;
            } else tx_phase++;
        }
    }
    top->final();
    delete top;
    return 0;
}
"""


def _compile(core: BoardCore) -> Path:
    """The simulated board's binary, built once per design (cached under ``$ANSFORGE_CACHE/verilator``)."""
    from amaranth.back import verilog

    if shutil.which("verilator") is None:
        raise ToolError("verilator is not on PATH (Debian: apt-get install verilator)")
    with progress.activity("board: writing the board top's Verilog"):
        v = verilog.convert(core, name="top")
    digest = hashlib.sha256((v + _HARNESS).encode()).hexdigest()[:20]
    root = cache_root() / "verilator"
    d = root / f"board-{digest}"
    exe = d / "obj_dir" / "Vtop"
    if exe.exists():
        return exe
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{d.name}.build-", dir=root))
    try:
        (tmp / "top.v").write_text(v)
        (tmp / "harness.cpp").write_text(_HARNESS)
        cmd = ["verilator", "--cc", "top.v", "--exe", "harness.cpp", "--top-module", "top", "--build",
               "-j", str(os.cpu_count() or 1), "-Wno-WIDTH", "-Wno-UNUSED", "-Wno-DECLFILENAME",
               "-Wno-CASEINCOMPLETE", "-Wno-LITENDIAN", "-O3", "--x-assign", "fast", "--x-initial", "fast",
               "--noassert"]
        with progress.activity(f"board: compiling the simulated board (once; cached in {root})", report=True):
            r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if r.returncode:
            raise ToolError(f"verilator failed on the board top: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
        try:
            os.rename(tmp, d)
        except OSError:
            pass                                 # another build put the same one in place first
        return exe
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class SimulatedBoard:
    """:class:`~ansforge.hdl.board.BoardCore` running in Verilator, its UART on the pseudo-terminal ``port``
    (open it with pyserial: ``serial.Serial(board.port, timeout=...)``). A context manager: leaving it
    stops the simulation."""

    core: BoardCore
    port: str = ""
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    def __enter__(self) -> "SimulatedBoard":
        exe = _compile(self.core)
        self._proc = subprocess.Popen([str(exe), str(self.core.divisor)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self._proc.stdout], [], [], 30)
        line = self._proc.stdout.readline().strip() if ready else ""
        if not line.startswith("/dev/"):
            self.close()
            raise ToolError("the simulated board did not open its pseudo-terminal")
        self.port = line
        return self

    def close(self) -> None:
        if self._proc is not None:
            try:
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
            self._proc.stdout.close()
            self._proc = None

    def __exit__(self, *exc) -> None:
        self.close()


def simulated_board(*, lanes: int = 1, codec=None, target: str = "bf16", memory_kib: int | None = None,
                    clock_hz: int = 60_000_000, divisor: int = 4, **options) -> SimulatedBoard:
    """A :class:`SimulatedBoard` of the board top ``ansforge board build`` makes with these parameters
    (``divisor``: design clocks per UART bit; the board's is ``clock_hz / 3 Mbaud``, a simulation's small)."""
    core = board_core(lanes=lanes, codec=codec, target=target, memory_kib=memory_kib, clock_hz=clock_hz,
                      divisor=divisor, **options)
    return SimulatedBoard(core)


def board_core(*, lanes: int = 1, codec=None, target: str = "bf16", memory_kib: int | None = None, clock_hz: int,
               divisor: int, **options) -> BoardCore:
    """The :class:`~ansforge.hdl.board.BoardCore` of a build: ``memory_kib`` of block memory (default the
    ULX3S-85F's, all of its block RAM)."""
    from ..hdl.board import BOARDS

    memory_kib = memory_kib or BOARDS["ulx3s-85f"].memory_kib
    if isinstance(codec, str):
        codec = parse_codec(codec)
    probe = AxiDecompressor(codec, lanes=lanes, target=target, **{k: v for k, v in options.items()
                                                                    if k in ("bus_bits",)})
    _layout_only(probe)
    beats = memory_kib * 1024 * 8 // probe.bus_bits
    return BoardCore(codec, lanes=lanes, target=target, memory_beats=beats, clock_hz=clock_hz, divisor=divisor,
                     **options)
