"""Joining a coder and its shell through a declared :class:`~amaranth.lib.wiring.Signature`.

Each family declares its coder ↔ shell signatures (``hdl/tans/link.py``, ``hdl/rans/link.py``) from the
shell's side (``Out``: the shell drives, ``In``: the coder answers). The shell's ports include the
members as they are and the coder's their flip, so that a coder built alone (``shell=False``) still
shows them as ports of the core; :func:`connect_link` joins the two in the core.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring

__all__ = ["connect_link", "link_ports"]


class _Side:
    """``component``'s members of ``signature``, as an interface :func:`amaranth.lib.wiring.connect` takes."""

    def __init__(self, component: wiring.Component, signature: wiring.Signature):
        self.signature = signature
        for name in signature.members:
            setattr(self, name, getattr(component, name))


def link_ports(link: wiring.Signature) -> dict:
    """The members of ``link`` as a signature dictionary's entries (the shell's side)."""
    return dict(link.members.items())


def connect_link(m: Module, link: wiring.Signature, shell: wiring.Component, coder: wiring.Component) -> None:
    """Join ``shell`` and ``coder`` through ``link`` (the shell's side of a family's signature)."""
    wiring.connect(m, _Side(shell, link), _Side(coder, link.flip()))
