"""Back-to-back commands through the four cores' shells (issues 18 and 19): how few clocks a command
boundary costs. That ``done`` comes once per command in order, that a reset drops what is queued but
keeps a programmed table, and the rest of each role's contract, are ``tests/sim/test_contracts.py``'s,
on every build of the core registry.

Idle clocks are counted in the Amaranth simulator (deterministic: inputs always offered, outputs
always taken): between the last pair (decoder: leaving ``o``; encoder: entering ``i``) of one command
and the first pair of the next.
"""

from __future__ import annotations

import pytest

from ..support import idle_clocks

#: Idle clocks per command boundary the shells reach (inputs offered, outputs taken), as regression
#: bounds. The decoders' remaining clocks are the coders' stream prologues (tANS: the first word, a
#: clock after the command so that the acceptance is not in front of the word take, lands behind a hole
#: in the bit window, then the marker skip and the state read; rANS: the state's initial pops), which
#: the shell cannot overlap with the previous stream's pairs: that needs a second bit window (a coder
#: change). The encoders' are the coders' pipeline drain and final flush.
IDLE_BOUND = {"tans-decoder": 5, "tans-encoder": 4, "rans-decoder": 3, "rans-encoder": 2}


@pytest.mark.parametrize("kind", list(IDLE_BOUND))
def test_back_to_back_commands_idle_clocks(kind):
    """Commands queued, inputs offered, outputs taken: bit-exact, one status per command, and the
    clocks between two commands' pairs stay within the coder's own prologue/flush."""
    idle = idle_clocks(kind)
    assert max(idle) <= IDLE_BOUND[kind], idle
