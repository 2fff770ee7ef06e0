"""Back-to-back commands through the four cores' shells (issues 18 and 19): the next command is
accepted while the previous one ends, ``done`` comes once per command in order, and a reset drops
what is queued but keeps a programmed table.

Idle clocks are counted in the Amaranth simulator (deterministic: inputs always offered, outputs
always taken): between the last pair (decoder: leaving ``o``; encoder: entering ``i``) of one command
and the first pair of the next.
"""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.cores import REGISTRY

from ..support import check_done_once_per_command, idle_clocks, queued_job, reset_mid_command

#: Idle clocks per command boundary the shells reach (inputs offered, outputs taken), as regression
#: bounds. The decoders' remaining clocks are the coders' stream prologues (tANS: the first word
#: lands behind a hole in the bit window, then the marker skip and the state read; rANS: the state's
#: initial pops), which the shell cannot overlap with the previous stream's pairs: that needs a
#: second bit window (a coder change). The encoders' are the coders' pipeline drain and final flush.
IDLE_BOUND = {"tans-decoder": 4, "tans-encoder": 4, "rans-decoder": 3, "rans-encoder": 2}


@pytest.mark.parametrize("kind", list(IDLE_BOUND))
def test_back_to_back_commands_idle_clocks(kind):
    """Commands queued, inputs offered, outputs taken: bit-exact, one status per command, and the
    clocks between two commands' pairs stay within the coder's own prologue/flush."""
    idle = idle_clocks(kind)
    assert max(idle) <= IDLE_BOUND[kind], idle


#: The one-state cores (the paper's codecs), then every base build of the core registry for its
#: default codec (``tans8x16``, ``rans16x16``: what ships): the builds the contracts below run on.
BUILDS = [(k, None) for k in IDLE_BOUND] + [(r.name, r.default_codec) for r in REGISTRY if r.base == r.name]


@pytest.mark.parametrize("kind, codec", BUILDS)
def test_done_once_per_command_in_order(kind, codec):
    """``done`` is high for exactly one clock per command, and never before the command's last
    pair has left ``o`` (decoders) / its last word has left ``o`` (encoders)."""
    check_done_once_per_command(kind, codec)


@pytest.mark.parametrize("kind, codec", BUILDS)
def test_reset_drops_queued_commands_keeps_the_table(kind, codec):
    """A programmable core is loaded, given a command and a queued second one, and reset mid-run:
    no ``done`` comes for either, the table survives (a table is memory, not reset; no reload), and the
    second command given again codes bit-exact with an OK status."""
    job = queued_job(kind, commands=2, pairs=30, seed=4, programmable=True, codec=codec)
    split = job.per_command_inputs[0]
    seen = reset_mid_command(job, split, 12)
    assert seen["dones"] == [1], seen["dones"]       # nothing reported for the dropped commands
    if kind.endswith("decoder"):
        assert seen["status"] == 0
    second = [v for p, v in seen["got"] if p == 1]
    assert np.array_equal(np.array(second, dtype=np.uint64), job.expected[job.per_command_outputs[0]:])
