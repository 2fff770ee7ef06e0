"""Software models: checkpoint readers, coding-pair formats and probability tables.

``checkpoint``
    Streaming readers for llama2.c, safetensors and GGUF files, and the default tensor selection.
``pairs``
    Coding-pair formats (paper §2, Fig. 2): bf16, fp16, fp32, and explicit float conversions.
``probability``
    Normalized N-bit frequencies (paper Eq. 2) and ideal code costs.
``constriction_codec``
    The codes through constriction's rANS ``AnsCoder``.
"""

__all__: list[str] = []
