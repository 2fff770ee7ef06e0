"""Software models: the golden models every core and report is checked against.

Three subpackages, one for each part of the paper:

``coding``
    The ANS codecs and their container (§2.1, §4.2, §4.4): normalized probabilities (Eq. 2), a
    tensor's code table, the codec objects (:class:`~.coding.codecs.TansCodec`,
    :class:`~.coding.codecs.RansCodec`), the golden tANS and rANS coders, streams and checkpoints,
    interleaved lanes (Fig. 12), context tables, the ``.ansf`` container, the constriction reference
    and the compiled kernels.
``dtypes``
    Coding pairs as data types (§2, §3, §4.3): IEEE floats, custom floats, posits, integers,
    saliency, binary and ternary weights, their code layouts, and the pair ↔ number interfaces.
``llm``
    The models the weights come from and go to: checkpoint readers (llama2.c, safetensors, GGUF), the
    llama config and its tensor list, a NumPy llama with llama2.c's semantics, converters, the
    tokenizer, the sampler and activations (§4.5).

``errors`` (the one-line user errors) and ``progress`` (progress bars) serve all three.

The flat module paths of earlier releases (``ansforge.model.tans``, ``ansforge.model.pairs``, ...)
still import, with a :class:`DeprecationWarning` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

__all__: list[str] = []

#: Where each module of the old flat layout lives now.
_MOVED = {
    **dict.fromkeys(("probability", "codetable", "tans", "rans", "lanes", "stream", "context", "container",
                     "constriction_codec", "codecs", "fastans"), "coding"),
    **dict.fromkeys(("pairs", "custom_float", "posit", "integers", "saliency", "ternary", "layout",
                     "interfaces"), "dtypes"),
    **dict.fromkeys(("checkpoint", "llama", "llama_convert", "tokenizer", "sampler", "activations"), "llm"),
}


class _MovedModuleFinder:
    """Imports ``ansforge.model.<old>`` as the module that now holds it, with a DeprecationWarning.

    A meta path finder and its own loader by protocol (``find_spec``, ``create_module``,
    ``exec_module``), not by subclassing :mod:`importlib.abc`, whose import (``importlib.resources``
    with it) cost every command 14 ms."""

    def find_spec(self, fullname, path=None, target=None):
        head, _, name = fullname.rpartition(".")
        if head != __name__ or name not in _MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        name = spec.name.rpartition(".")[2]
        new = f"{__name__}.{_MOVED[name]}.{name}"
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):
        pass


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
