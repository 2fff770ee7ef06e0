"""The models the weights come from and feed: checkpoints and a NumPy llama.

``checkpoint``
    Streaming readers for llama2.c, safetensors and GGUF files and sharded Hugging Face folders (tensor
    by tensor, memory-mapped), the default tensor selection, and safetensors writing (one file or shards).
``llama``
    The llama config, its tensor list, and a NumPy llama with llama2.c ``run.c`` semantics.
``llama_convert``
    A llama between llama2.c, Hugging Face safetensors and GGUF layouts.
``tokenizer``, ``sampler``
    llama2.c's ``tokenizer.bin`` and ``run.c``'s sampler.
``synth``
    A synthetic Llama-2-7B-shaped folder drawn from measured weight statistics (``ansforge synth``).
``activations``
    Activations as coding pairs (§4.5).
"""

__all__: list[str] = []
