import numpy as np
from ansforge.model.coding.container import compress_checkpoint, open_container
from ansforge.model.llm.checkpoint import write_safetensors
rng = np.random.default_rng(42)
a = (rng.standard_normal((64, 96)) * 0.02).astype(np.float32)
a[:, ::7] *= 4.0                                   # column structure for a context plan
c = (rng.standard_normal((48, 64)) * 0.05).astype(np.float32)
c[5::6] = c[5::6].astype(np.float16).astype(np.float32)
b = ((rng.standard_normal(100) * 0.1).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
ids = np.arange(6, dtype=np.int32)
data = {"w.a": a, "w.c": c, "w.b": b, "ids": ids.view(np.uint8)}
write_safetensors("fx.safetensors", [("w.a", "F32", a.shape), ("w.c", "F32", c.shape), ("w.b", "BF16", b.shape),
                                     ("ids", "I32", ids.shape)], lambda i, n: [data[n]])
for name, codec, kw in [("tans8", "tans8", {}), ("tans8x2", "tans8x2", {"group": "tensor"}),
                        ("tans8x16", "tans8x16", {}), ("rans16", "rans16", {}),
                        ("rans16x5", "rans16x5", {"group": "tensor"}), ("rans16x16", "rans16x16", {}),
                        ("rans24", "rans24", {}), ("tans8_context", "tans8", {"context": True}),
                        ("rans16_context", "rans16", {"context": True, "group": "tensor"})]:
    compress_checkpoint("fx.safetensors", f"{name}.ansf", codec, checkpoint_interval=256, **kw)
    ct = open_container(f"{name}.ansf")
    print(name, ct.version, [s for s in ct.__dict__.keys()][:0])
